"""The one size formatter and parser of the project.

Sizes are ``int`` bytes everywhere in code and JSON; people see binary units.
"""

from __future__ import annotations

import re

from memprof.base.errors import BadInput

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

# Units spelled out: case-insensitive; binary (…iB) are powers of 1024, SI (…B) of 1000.
_UNITS = {
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}
# One-letter suffixes as vLLM's ``human_readable_int`` reads them (vllm-project/vllm v0.11+,
# vllm/utils/argparse_utils.py ``human_readable_int``; earlier in vllm/engine/arg_utils.py):
# upper case binary (``16K`` = 16,384), lower case decimal (``25.6k`` = 25,600), and no decimals
# with a binary letter.
_VLLM_BINARY = {"K": KiB, "M": MiB, "G": GiB, "T": TiB}
_VLLM_DECIMAL = {"k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}
_SIZE_RE = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)\s*([a-zA-Z]*)\s*$")
MAX_SIZE_TEXT = 64  # characters; a longer size is a mistake, not a size
MAX_BYTES = 1 << 60  # 1 EiB: far above any GPU, far below what breaks arithmetic
SIZE_FORMS = "80GiB, 23.58GiB, 512MiB (binary), 80GB (SI) or 16G (binary, as vLLM reads it)"


def parse_size(text: str, *, bare_bytes: bool = False, vllm_letters: bool = False,
               zero_ok: bool = False) -> int:
    """Parse a size into whole bytes (rounded down), exactly (no float rounding).

    Accepted: a number with a unit — ``80GiB``/``512MiB``/``1TiB`` (binary), ``4GB``/``500MB``
    (SI), ``B``, or one upper-case letter ``16G`` (binary: memprof and vLLM agree). Refused, with
    the accepted forms in the hint, so nothing is guessed:

    - a comma (``23,58GiB``: a decimal comma or a thousands separator — which one is a guess);
    - a number without a unit (``80``: bytes or GiB?), unless ``bare_bytes`` — flags whose engine
      reads bytes, such as vLLM's ``--kv-cache-memory-bytes``;
    - a lower-case one-letter unit (``80g``: vLLM reads it as 10^9, memprof used to read 2^30),
      unless ``vllm_letters``, where vLLM's own rule applies (lower case decimal);
    - zero (unless ``zero_ok``: a flag where none is a setting, such as ``--headroom 0``, which
      then needs no unit), negative, more than 1 EiB, or more than 64 characters.
    """
    if len(text) > MAX_SIZE_TEXT:
        raise BadInput(f"the size {text[:24]!r}… is {len(text)} characters long",
                       hint=f"write a size such as {SIZE_FORMS}")
    if "," in text:
        raise BadInput(f"cannot read the size {text!r}: a comma is either a decimal comma or a "
                       "thousands separator, and memprof does not guess which",
                       hint=f"use a decimal point and a unit: {SIZE_FORMS}")
    m = _SIZE_RE.match(text)
    if not m:
        raise BadInput(f"cannot read the size {text!r}", hint=f"write e.g. {SIZE_FORMS}")
    number = m.group(1).replace("_", "")
    unit = m.group(2)
    zero = not number.strip("0._")
    if not unit:
        if not bare_bytes and not (zero and zero_ok):  # "0" needs no unit: none is none
            raise BadInput(f"the size {text!r} has no unit",
                           hint=f"write the unit: {SIZE_FORMS}")
        mult = 1
    elif unit.lower() in _UNITS:
        mult = _UNITS[unit.lower()]
    elif unit in _VLLM_BINARY:
        if "." in number and vllm_letters:
            raise BadInput(f"vLLM allows no decimals with a binary letter ({text!r})",
                           hint=f"write {number}{unit}iB, or {number}{unit.lower()} (decimal)")
        mult = _VLLM_BINARY[unit]
    elif unit in _VLLM_DECIMAL and vllm_letters:
        mult = _VLLM_DECIMAL[unit]
    elif unit in _VLLM_DECIMAL:
        power = "kmgt".index(unit) + 1
        big = unit.upper()
        raise BadInput(f"the size {text!r} is ambiguous: {unit!r} is 10^{3 * power} for vLLM "
                       f"but was 2^{10 * power} in memprof",
                       hint=f"write {number}{big}iB (binary) or {number}{big}B (SI)")
    else:
        raise BadInput(f"unknown unit {unit!r} in the size {text!r}",
                       hint=f"write e.g. {SIZE_FORMS}")
    from fractions import Fraction  # only where a size is parsed: ~2 ms of a cold start

    if zero and zero_ok:
        return 0
    value = int(Fraction(number) * mult)
    if value <= 0:
        raise BadInput(f"the size {text!r} must be at least one byte", hint="e.g. 80GiB")
    if value > MAX_BYTES:
        raise BadInput(f"the size {text!r} is larger than 1 EiB", hint="e.g. 80GiB")
    return value


_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_HUMAN_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9}
_HUMAN_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30}


def human_readable_int(text: str) -> int:
    """vLLM's ``human_readable_int`` (engine/arg_utils.py, 0.8.4 – 0.33.0), rule for rule:
    digits (with an optional decimal part) and one letter — k / m / g decimal (``25.6k`` =
    25,600), K / M / G binary (``32K`` = 32,768; a decimal with a binary letter is refused),
    t / T match its pattern but have no multiplier and fall to ``int()``, which refuses them —
    else a plain ``int()``.
    ``ValueError`` where vLLM's argparse refuses the value."""
    value = text.strip()
    m = _HUMAN.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _HUMAN_DECIMAL:
            return int(float(number) * _HUMAN_DECIMAL[suffix])
        if suffix in _HUMAN_BINARY:
            return int(number) * _HUMAN_BINARY[suffix]  # ValueError for "1.5K", as vLLM's
    return int(value)


def fmt_bytes(n: int | float, precision: int = 2) -> str:
    """Format bytes in binary units: ``fmt_bytes(3 * GiB // 2) == '1.50 GiB'``."""
    sign = "-" if n < 0 else ""
    a = abs(n)
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if a >= size:
            return f"{sign}{a / size:.{precision}f} {unit}"
    return f"{sign}{int(a)} B"


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def round_up(a: int, multiple: int) -> int:
    """Round ``a`` up to a multiple of ``multiple``."""
    return cdiv(a, multiple) * multiple
