"""The one rule for every file memprof reads or writes on a user's behalf.

Reading (``read_capped``): only a regular file is read (a FIFO, ``/dev/zero``, a socket, a
terminal or ``<(tail -f …)`` is refused before a byte is read, so a read never blocks or runs
without end), and never more than its cap, which the caller states and the error names.

Writing (``check_output`` then ``write_atomic``): an output path is checked before any work is
done (its folder must already exist: memprof never creates folders; the path must not be a
folder), and the file is written whole or not at all: the bytes go to an unnamed file in the
target's folder (``O_TMPFILE``) that is given a name only once complete and then renamed into
place, so a process killed while writing leaves nothing behind. Where the file system has no
``O_TMPFILE`` a named ``.NAME.*.tmp`` is used instead, and such leftovers of an earlier killed
write are removed by the next write of the same file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from memprof.base.errors import BadInput
from memprof.base.units import fmt_bytes

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def path_kind(path: str | Path) -> str:
    """What ``path`` names, without raising: ``"file"``, ``"folder"``, ``"other"`` (a FIFO, a
    device, a socket), ``"missing"`` (also a name too long to exist, or a path through a file),
    or ``"inaccessible"`` (no permission on the way, a loop of links). ``Path.exists`` and
    friends raise ``OSError`` for a name too long; a user's path goes through this instead."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as exc:
        return "missing" if exc.errno == errno.ENAMETOOLONG else "inaccessible"
    except ValueError:  # a NUL byte in the path
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    return "folder" if stat.S_ISDIR(mode) else "other"


def read_capped(path: str | Path, *, what: str, cap: int, hint: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them.

    ``what`` names the file in errors ("the log", "the baseline"); ``hint`` is the way out for a
    missing or wrong file. A path that is not a regular file, or a file larger than ``cap``
    (checked before reading, and again while reading in case it grows), is :class:`BadInput`.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if str(path) == "-":  # the shell habit for standard input, which may never end
            raise BadInput(f"{what} '-': memprof reads a file, not standard input",
                           hint=f"save it to a file first ({what} is read whole, up to "
                           f"{fmt_bytes(cap)}: ... > FILE) and pass that file") from None
        raise BadInput(f"{what} {p} does not exist", hint=hint) from None
    except OSError as exc:
        raise BadInput(f"cannot read {what} {p}: {exc.strerror}", hint=hint) from None
    if stat.S_ISDIR(st.st_mode):
        raise BadInput(f"{what} {p} is a folder, not a file", hint=hint)
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{what} {p} is {_kind(st.st_mode)}, not a regular file",
                       hint=f"save it to a file first ({what} is read whole, up to "
                       f"{fmt_bytes(cap)})")
    too_big = BadInput(f"{what} {p} is larger than {fmt_bytes(cap)} (the cap for {what})",
                       hint=hint)
    if st.st_size > cap:
        raise too_big
    try:
        # O_NONBLOCK: if the path was swapped for a FIFO after the stat, open does not wait.
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise BadInput(f"cannot read {what} {p}: {exc.strerror}", hint=hint) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise BadInput(f"{what} {p} is not a regular file", hint=hint)
        # In pieces, never more than the file's size (or the cap) ahead: a single
        # read(cap + 1) would reserve the whole cap in memory before reading a byte.
        chunks: list[bytes] = []
        got = 0
        want = min(st.st_size, cap) + 1
        try:
            while got <= cap:
                chunk = f.read(min(want, cap + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
                want = 1 << 20  # the file grew since the stat: go on a MiB at a time
        except OSError as exc:
            raise BadInput(f"cannot read {what} {p}: {exc.strerror}", hint=hint) from None
    if got > cap:
        raise too_big
    return b"".join(chunks)


def read_capped_text(path: str | Path, *, what: str, cap: int, hint: str) -> str:
    """:func:`read_capped` decoded as UTF-8; a file that is not UTF-8 is :class:`BadInput`. A
    leading byte-order mark (what Windows editors write) is dropped: it is no part of the text,
    and left in it hid a script's first line (``\ufeffvllm serve …`` is no serve command)."""
    data = read_capped(path, what=what, cap=cap, hint=hint)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadInput(f"{what} {path} is not UTF-8 text", hint=hint) from None


def check_output(path: str | Path, *, flag: str) -> Path:
    """``path`` as a :class:`Path`, once it is known that a file can be written there: its folder
    exists (memprof never creates folders) and is writable, and ``path`` is not a folder.
    Call it before any work is done, so a bad path costs nothing."""
    p = Path(path)
    text = str(path)
    if not text or text.endswith(os.sep):
        raise BadInput(f"{flag} {text!r} names no file", hint=f"give {flag} a file name")
    parent = p.parent if str(p.parent) else Path(".")
    short = text if len(text) <= 120 else text[:60] + "…" + text[-40:]
    try:
        parent_mode: int | None = os.stat(parent).st_mode
    except FileNotFoundError:
        parent_mode = None
    except OSError as exc:  # a name too long, a loop of links, no permission on the way
        raise BadInput(f"{flag} {short}: {exc.strerror}",
                       hint=f"give {flag} a path that can be written") from None
    if parent_mode is None or not stat.S_ISDIR(parent_mode):
        what = "does not exist" if parent_mode is None else "is not a folder"
        raise BadInput(f"{flag} {short}: the folder {parent} {what}",
                       hint=f"create it first (mkdir -p {parent}); memprof never creates "
                       "folders")
    try:
        mode: int | None = os.stat(p).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise BadInput(f"{flag} {short}: {exc.strerror}",
                       hint=f"give {flag} a path that can be written") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise BadInput(f"{flag} {short} is a folder", hint=f"give {flag} a file name inside it")
    if mode is not None and not stat.S_ISREG(mode):
        raise BadInput(f"{flag} {short} is {_kind(mode)}",
                       hint=f"give {flag} a regular file's path")
    if len(p.name.encode()) + 24 > os.pathconf(parent, "PC_NAME_MAX"):
        raise BadInput(f"{flag} {short}: the file name is too long",
                       hint=f"give {flag} a shorter name")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(f"{flag} {short}: the folder {parent} is not writable",
                       hint="choose a folder you can write to")
    return p


def _leftovers(path: Path) -> list[Path]:
    return list(path.parent.glob(f".{path.name}.*.tmp"))


def _link_unnamed(fd: int, folder: Path, name: Path) -> None:
    """Give the ``O_TMPFILE`` file ``fd`` the name ``name``: ``linkat`` with
    ``AT_SYMLINK_FOLLOW`` on its ``/proc`` entry (a ``dir_fd`` makes Python call ``linkat``)."""
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=dfd, follow_symlinks=True)
    finally:
        os.close(dfd)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` whole or not at all (see the module docstring). The folder
    must exist (:func:`check_output` says so before the work); the file keeps its mode, or gets
    the one ``open`` would give it."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        mode = p.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    folder = p.parent if str(p.parent) else Path(".")
    for old in _leftovers(p):  # a named temp file of an earlier write that was killed
        with contextlib.suppress(OSError):
            old.unlink()
    tmp = folder / f".{p.name}.{os.urandom(6).hex()}.tmp"  # O_EXCL below: never an old file
    fd = -1
    named = False
    try:
        try:
            fd = os.open(folder, os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, mode)
        except (AttributeError, OSError):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            named = True
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.fchmod(fd, mode)
        if not named:
            _link_unnamed(fd, folder, tmp)
            named = True
        os.replace(tmp, p)
        named = False
    except OSError as exc:
        raise BadInput(f"cannot write {p}: {exc.strerror or exc}",
                       hint="check the folder, its permissions and free space") from None
    finally:
        if fd >= 0:
            os.close(fd)
        if named:
            with contextlib.suppress(OSError):
                tmp.unlink()
    try:  # make the rename durable (POSIX); not every platform can open a folder
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dfd)
