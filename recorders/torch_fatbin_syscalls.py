"""Which of a torch wheel's CUDA modules call the device-side ``__assertfail`` / ``vprintf``, read
from ``libtorch_cuda.so``'s ``.nv_fatbin`` section without a GPU, and the module that holds torch's
fill kernel (``torch.zeros``), per architecture.

The H100 goldens (reports/gpu/context/first-kernel-syscalls-h100.json) show that the first-kernel
step is paid by the load of the process's first module that references ``__assertfail`` (or
``vprintf``), whatever the module's size; this says, for every torch build read, whether the
module of the kernel a serving engine runs first references it on each architecture.

    pip download --no-deps torch==2.11.0   (and other releases)
    python recorders/torch_fatbin_syscalls.py OUT.json torch-*.whl

Each fatbin entry: kind (2 = ELF) at byte 0, header size at 4, payload size at 8, the stored
(compressed) size as a u32 at 16, architecture at 28, decompressed size at 56 (0: stored
uncompressed). Compressed payloads are zstd (magic 28 b5 2f fd: torch 2.11) or LZ4 blocks (torch
2.5.1, 2.10.0), decompressed through the system's libzstd.so.1 / liblz4.so.1 (ctypes). An image's
undefined symbols are read from its ELF symbol table.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import struct
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAGIC = 0xBA55ED50
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SYSCALLS = ("__assertfail", "vprintf")
# torch.zeros(n, device="cuda") on a float tensor: the vectorized fill kernel (aten FillKernel.cu)
FILL_KERNEL = b"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
WHAT = ("per torch wheel, libtorch_cuda.so's CUDA modules (fatbin ELF entries) by architecture: "
        "how many there are and how many reference the device-side __assertfail / vprintf "
        "(undefined symbols of the decompressed image), and the module holding the float fill "
        "kernel (torch.zeros): its image size and which of the two it references; python "
        "recorders/torch_fatbin_syscalls.py OUT.json <torch wheels>")


def section(data: bytes, name: str) -> bytes:
    """An ELF64 little-endian section's bytes by name."""
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    for h in heads:
        start = names + h[0]
        if data[start:data.index(b"\0", start)].decode() == name:
            return data[h[4]:h[4] + h[5]]
    raise ValueError(f"no section {name}")


def entries(fatbin: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(fatbin number, kind, architecture, image) for each entry, decompressed."""
    pos, n = 0, 0
    while pos + 16 <= len(fatbin):
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != MAGIC:
            pos += 8
            continue
        n += 1
        p = pos + hsize
        while p < pos + hsize + fsize:
            kind, _u, ehs, size = struct.unpack_from("<HHIQ", fatbin, p)
            stored = struct.unpack_from("<I", fatbin, p + 16)[0]
            arch = struct.unpack_from("<I", fatbin, p + 28)[0]
            dec = struct.unpack_from("<Q", fatbin, p + 56)[0] if ehs >= 64 else 0
            payload = fatbin[p + ehs:p + ehs + size]
            yield n, kind, arch, decompress(payload[:stored], dec) if dec else payload
            p += ehs + size
        pos += hsize + fsize


def decompress(src: bytes, size: int) -> bytes:
    """A compressed fatbin payload (zstd frame or LZ4 block) of ``size`` bytes decompressed."""
    buf = ctypes.create_string_buffer(size)
    if src[:4] == ZSTD_MAGIC:
        z = ctypes.CDLL("libzstd.so.1")
        z.ZSTD_decompress.restype = ctypes.c_size_t
        z.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                      ctypes.c_size_t]
        got = int(z.ZSTD_decompress(buf, size, src, len(src)))
    else:
        lz = ctypes.CDLL("liblz4.so.1")
        lz.LZ4_decompress_safe_partial.restype = ctypes.c_int
        lz.LZ4_decompress_safe_partial.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                                   ctypes.c_int, ctypes.c_int, ctypes.c_int]
        got = int(lz.LZ4_decompress_safe_partial(src, buf, len(src), size, size))
    if got != size:
        raise ValueError(f"decompressed {got} bytes, expected {size}")
    return buf.raw


def undefined(img: bytes) -> set[str]:
    """Names of an ELF image's undefined symbols."""
    shoff = struct.unpack_from("<Q", img, 0x28)[0]
    shentsize, shnum, _ = struct.unpack_from("<HHH", img, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", img, shoff + i * shentsize) for i in range(shnum)]
    out: set[str] = set()
    for h in heads:
        if h[1] != 2:  # SHT_SYMTAB
            continue
        strtab = heads[h[6]][4]
        for i in range(h[5] // 24):
            name, _info, _other, shndx, _v, _s = struct.unpack_from("<IBBHQQ", img, h[4] + i * 24)
            if shndx == 0 and name:
                out.add(img[strtab + name:img.index(b"\0", strtab + name)].decode())
    return out


def read(lib: bytes) -> dict[str, Any]:
    """Per ``sm<arch>``: modules, those referencing each syscall, and the fill kernel's module."""
    out: dict[str, Any] = {}
    for fat, kind, arch, img in entries(section(lib, ".nv_fatbin")):
        if kind != 2:
            continue
        row = out.setdefault(f"sm{arch}", {"modules": 0, **{s: 0 for s in SYSCALLS}})
        row["modules"] += 1
        und = undefined(img)
        for s in SYSCALLS:
            row[s] += s in und
        if FILL_KERNEL in img:
            row["fill_module"] = {"fatbin": fat, "image_bytes": len(img),
                                  "references": sorted(s for s in SYSCALLS if s in und)}
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: torch_fatbin_syscalls.py OUT.json WHEEL [WHEEL ...]", file=sys.stderr)
        return 2
    res = {}
    for whl in argv[1:]:
        with zipfile.ZipFile(whl) as z:
            name = next(n for n in z.namelist() if n.endswith("lib/libtorch_cuda.so"))
            data = z.read(name)
        res[Path(whl).name] = {
            "library": name, "library_sha256": hashlib.sha256(data).hexdigest(),
            "wheel_sha256": hashlib.sha256(Path(whl).read_bytes()).hexdigest(),
            "architectures": read(data)}
        print(Path(whl).name, {a: (r["modules"], r["__assertfail"], r.get("fill_module"))
                               for a, r in res[Path(whl).name]["architectures"].items()})
    Path(argv[0]).write_text(json.dumps({"what": WHAT, "wheels": res}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
