"""Cut the SASS images of some architectures out of an NCCL library's ``.nv_fatbin`` section into
a smaller fatbin that ``cuobjdump`` reads (``recorders/gpu_nccl_kernel_stack.py``), for an NCCL
release the GPU machine does not have (its wheel is too large to carry).

    pip download --no-deps nvidia-nccl-cu12==2.21.5 && unzip the wheel's nvidia/nccl/lib/
    objcopy -O binary --only-section=.nv_fatbin libnccl.so.2 nccl.fatbin
    python recorders/nccl_fatbin_images.py nccl.fatbin 80,90 nccl-2.21.5-sm80-sm90.fatbin

The section is one fatbin container (magic 0xBA55ED50, version, header size, payload size) of
entries, each with its own header (kind, header size, payload size; the architecture at byte
28); entries of other architectures are dropped and the container's size fixed. 2.21.5's cu12
library holds one compressed ELF image each for sm_50, 60, 61, 70, 80 and 90 and no PTX.
"""

from __future__ import annotations

import struct
import sys

MAGIC = 0xBA55ED50


def keep_images(data: bytes, archs: set[int]) -> tuple[bytes, list[int]]:
    """The container with only the entries of ``archs``, and every entry's architecture."""
    magic, version, hsize, fsize = struct.unpack_from("<IHHQ", data, 0)
    if magic != MAGIC:
        raise ValueError("not a fatbin container")
    pos, kept, seen = hsize, [], []
    while pos < hsize + fsize:
        _kind, _unk, ehs, size = struct.unpack_from("<HHIQ", data, pos)
        arch = struct.unpack_from("<I", data, pos + 28)[0]
        seen.append(arch)
        if arch in archs:
            kept.append(data[pos:pos + ehs + size])
        pos += ehs + size
    body = b"".join(kept)
    return struct.pack("<IHHQ", magic, version, hsize, len(body)) + data[16:hsize] + body, seen


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: nccl_fatbin_images.py IN_FATBIN ARCHS OUT_FATBIN", file=sys.stderr)
        return 2
    with open(argv[0], "rb") as f:
        out, seen = keep_images(f.read(), {int(a) for a in argv[1].split(",")})
    with open(argv[2], "wb") as f:
        f.write(out)
    print("images:", seen)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
