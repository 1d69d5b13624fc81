"""Read single files out of a release's wheel on PyPI without downloading the wheel.

A wheel is a zip archive, and PyPI's file host answers HTTP ``Range`` requests, so
``zipfile.ZipFile`` over a seekable file object that fetches only the byte ranges it is asked
for reads the central directory (the end of the file) and then the members asked for: a few
hundred KB instead of a vLLM wheel's 400 MB. ``tools/vllm_architectures.py --pypi`` and
``tools/sglang_architectures.py --pypi`` read each release's model registry this way.

A release's files are listed by PyPI's simple index in its JSON form (PEP 691,
https://pypi.org/simple/<project>/); the first wheel of the release is read (a release's
platform wheels ship the same Python files).
"""

from __future__ import annotations

import io
import json
import urllib.request
import zipfile
from functools import lru_cache
from typing import Any

INDEX = "https://pypi.org/simple/{project}/"
_TIMEOUT = 60
_BLOCK = 1 << 16  # bytes fetched at least per request (zipfile reads in small pieces)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over ``url`` that fetches the bytes read by Range requests."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.pos = url, size, 0
        self.fetched = 0  # bytes transferred, for the caller's log
        self._cache: tuple[int, bytes] = (0, b"")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def _get(self, start: int, end: int) -> bytes:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
            if resp.status != 206:
                raise OSError(f"{self.url}: no range support (HTTP {resp.status})")
            data: bytes = resp.read()
        self.fetched += len(data)
        return data

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        start, data = self._cache
        if not (start <= self.pos and end <= start + len(data)):
            start = self.pos
            data = self._get(start, min(self.size, max(end, start + _BLOCK)))
            self._cache = (start, data)
        out = data[self.pos - start:end - start]
        self.pos += len(out)
        return out

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


@lru_cache(maxsize=4)
def _files(project: str) -> tuple[dict[str, Any], ...]:
    req = urllib.request.Request(INDEX.format(project=project),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=_TIMEOUT) as resp:
        return tuple(json.load(resp)["files"])


def release_wheel(project: str, version: str) -> tuple[str, int]:
    """The URL and size of ``project``'s first wheel of ``version`` on PyPI (by file name)."""
    prefix = f"{project.replace('-', '_')}-{version}-"
    wheels = sorted((f for f in _files(project) if f["filename"].startswith(prefix)
                     and f["filename"].endswith(".whl")), key=lambda f: f["filename"])
    if not wheels:
        raise LookupError(f"{project} {version}: no wheel on PyPI")
    return wheels[0]["url"], int(wheels[0]["size"])


def open_wheel(project: str, version: str) -> zipfile.ZipFile:
    """``project``'s wheel of ``version`` as a zip read by Range requests."""
    url, size = release_wheel(project, version)
    return zipfile.ZipFile(RangeFile(url, size))  # type: ignore[arg-type]
