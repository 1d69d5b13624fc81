"""The size of each SASS image an NCCL wheel's ``libnccl.so.2`` carries, read from its
``.nv_fatbin`` section without a GPU: per architecture, the ELF image's stored (compressed) and
decompressed bytes, as the fatbin entry headers give them (``recorders/nccl_fatbin_images.py``
reads the same container).

    pip download --no-deps nvidia-nccl-cu12==2.21.5
    python recorders/nccl_image_sizes.py OUT.json nvidia_nccl_cu12-2.21.5-*.whl [more wheels]

Entry header fields used: kind (2 = ELF, 1 = PTX) at byte 0, header size at 4, payload size at
8, architecture at 28 and the decompressed size at 56 (0 where the image is stored
uncompressed: its payload size is then its size). A wheel whose library carries several images
of one architecture (2.27.x: one per part of the device code) gets their sum.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
import zipfile
from pathlib import Path

MAGIC = 0xBA55ED50


def section(data: bytes, name: str) -> bytes:
    """An ELF64 little-endian section's bytes by name."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, ...]:
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)

    names = header(shstrndx)[4]
    for i in range(shnum):
        h = header(i)
        start = names + h[0]
        if data[start:data.index(b"\0", start)].decode() == name:
            return data[h[4]:h[4] + h[5]]
    raise ValueError(f"no section {name}")


def images(fatbin: bytes) -> dict[str, dict[str, int]]:
    """Per ``<kind>_sm<arch>``: entries, stored bytes and decompressed bytes."""
    out: dict[str, dict[str, int]] = {}
    pos = 0
    while pos + 16 <= len(fatbin):
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != MAGIC:
            pos += 8
            continue
        p = pos + hsize
        while p < pos + hsize + fsize:
            kind, _u, ehs, size = struct.unpack_from("<HHIQ", fatbin, p)
            arch = struct.unpack_from("<I", fatbin, p + 28)[0]
            dec = struct.unpack_from("<Q", fatbin, p + 56)[0] if ehs >= 64 else 0
            key = f"{'elf' if kind == 2 else 'ptx' if kind == 1 else kind}_sm{arch}"
            got = out.setdefault(key, {"entries": 0, "stored_bytes": 0, "bytes": 0})
            got["entries"] += 1
            got["stored_bytes"] += size
            got["bytes"] += dec or size
            p += ehs + size
        pos += hsize + fsize
    return out


WHAT = ("decompressed size of each SASS (elf) / PTX image in the .nv_fatbin section of "
        "libnccl.so.2, per nvidia-nccl-cu12 / -cu13 wheel (pip download --no-deps "
        "nvidia-nccl-cuXX==X); python recorders/nccl_image_sizes.py images.json <wheels>")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: nccl_image_sizes.py OUT.json WHEEL [WHEEL ...]", file=sys.stderr)
        return 2
    res = {}
    for whl in argv[1:]:
        raw = Path(whl).read_bytes()
        with zipfile.ZipFile(whl) as z:
            lib = next(n for n in z.namelist() if n.endswith("libnccl.so.2"))
            data = z.read(lib)
        res[Path(whl).name] = {"library": lib, "library_bytes": len(data),
                               "images": images(section(data, ".nv_fatbin")),
                               "wheel_sha256": hashlib.sha256(raw).hexdigest()}
        print(Path(whl).name, {k: v["bytes"] for k, v in res[Path(whl).name]["images"].items()})
    Path(argv[0]).write_text(json.dumps({"what": WHAT, "wheels": res}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
