"""memprof.base.files: the one rule for reading and writing users' files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.base.files import check_output, read_capped, read_capped_text, write_atomic


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    done = threading.Event()
    errors: list[BadInput] = []

    def read() -> None:
        try:
            read_capped(fifo, what="the log", cap=1 << 20, hint="h")
        except BadInput as exc:
            errors.append(exc)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "reading a FIFO blocked"
    assert "FIFO" in errors[0].message and "1.00 MiB" in errors[0].hint


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_devices_are_refused(path: str) -> None:
    with pytest.raises(BadInput, match="character device"):
        read_capped(path, what="the log", cap=1024, hint="h")


def test_a_folder_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="folder"):
        read_capped(tmp_path, what="the log", cap=1024, hint="h")
    with pytest.raises(BadInput, match="does not exist"):
        read_capped(tmp_path / "none", what="the log", cap=1024, hint="h")


def test_the_cap_is_stated_and_exact(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert read_capped(f, what="x", cap=100, hint="h") == b"x" * 100
    with pytest.raises(BadInput, match="larger than 99 B"):
        read_capped(f, what="x", cap=99, hint="h")


def test_text_must_be_utf8(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"\xff\xfe")
    with pytest.raises(BadInput, match="UTF-8"):
        read_capped_text(f, what="x", cap=100, hint="h")


def test_output_paths_are_checked_and_no_folder_is_made(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        check_output(tmp_path / "nodir" / "x.csv", flag="-o")
    assert not (tmp_path / "nodir").exists()
    with pytest.raises(BadInput, match="is a folder"):
        check_output(tmp_path, flag="-o")
    with pytest.raises(BadInput, match="names no file"):
        check_output("", flag="-o")
    assert check_output(tmp_path / "x.csv", flag="-o") == tmp_path / "x.csv"


def test_write_atomic_replaces_whole_keeps_the_mode_and_cleans_leftovers(tmp_path: Path) -> None:
    f = tmp_path / "b.json"
    write_atomic(f, "one")
    os.chmod(f, 0o600)
    stale = tmp_path / ".b.json.killed.tmp"  # what a write killed with SIGKILL once left
    stale.write_text("half")
    write_atomic(f, b"two")
    assert f.read_text() == "two"
    assert f.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_write_atomic_into_a_missing_folder_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="cannot write"):
        write_atomic(tmp_path / "nodir" / "x", "x")
    assert not (tmp_path / "nodir").exists()


def test_a_name_too_long_is_bad_input_before_work(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="too long"):
        check_output(tmp_path / ("x" * 300), flag="-o")
    # a name that fits, but not with the temporary name's prefix and suffix beside it
    with pytest.raises(BadInput, match="too long"):
        check_output(tmp_path / ("x" * 250), flag="-o")
    with pytest.raises(BadInput, match="too long"):
        check_output(tmp_path / ("x" * 300) / "y.csv", flag="-o")


def test_path_kind_never_raises(tmp_path: Path) -> None:
    from memprof.base.files import path_kind

    (tmp_path / "f").write_text("x")
    os.mkfifo(tmp_path / "p")
    assert path_kind(tmp_path / "f") == "file"
    assert path_kind(tmp_path) == "folder"
    assert path_kind(tmp_path / "p") == "other"
    assert path_kind(tmp_path / "none") == "missing"
    assert path_kind(tmp_path / "f" / "under-a-file") == "missing"
    assert path_kind("x" * 5000) == "missing"  # Path.exists() raises here
    assert path_kind("a\0b") == "missing"


def test_a_large_cap_reserves_no_memory_up_front(tmp_path: Path) -> None:
    import resource

    f = tmp_path / "small"
    f.write_bytes(b"abc")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert read_capped(f, what="x", cap=1 << 40, hint="h") == b"abc"  # a 1 TiB cap
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB
