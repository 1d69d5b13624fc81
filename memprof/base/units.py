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

_UNITS = {
    "": 1,
    "b": 1,
    "k": KiB,
    "kib": KiB,
    "kb": 1000,
    "m": MiB,
    "mib": MiB,
    "mb": 1000**2,
    "g": GiB,
    "gib": GiB,
    "gb": 1000**3,
    "t": TiB,
    "tib": TiB,
    "tb": 1000**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Parse ``"80GiB"``, ``"512MiB"``, ``"23.58GiB"``, ``"1e9"``-free plain ints, ``"4GB"`` (SI).

    Binary suffixes (KiB, MiB, GiB, TiB, and bare K/M/G/T) are powers of 1024; KB/MB/GB/TB are SI.
    The result is rounded down to whole bytes. Raises ``BadInput`` on anything else, or on a size
    that is not positive.
    """
    m = _SIZE_RE.match(text.replace("_", "").replace(",", ""))
    if not m or m.group(2).lower() not in _UNITS:
        raise BadInput(
            f"cannot read the size {text!r}",
            hint="write a number with a binary unit, e.g. 80GiB, 23.58GiB or 512MiB",
        )
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise BadInput(f"the size {text!r} must be positive", hint="e.g. 80GiB")
    return value


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
