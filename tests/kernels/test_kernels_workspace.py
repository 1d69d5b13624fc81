"""Workspace: WorkspaceManager alignment, growth, locking and pointer rules."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from memprof.core.scratch import WORKSPACE_ALIGN  # noqa: E402
from memprof.kernels.workspace import Workspace, WorkspaceLockedError  # noqa: E402


def test_views_are_aligned_and_share_one_buffer() -> None:
    ws = Workspace("cpu")
    a, b, c = ws.get_simultaneous(((3,), torch.float32), ((5, 7), torch.bfloat16),
                                  ((2, 2), torch.int64))
    base = ws.data_ptr()
    offsets = [t.data_ptr() - base for t in (a, b, c)]
    assert offsets == [0, 256, 512]  # 12 B -> 256, 70 B -> 256
    assert all(o % WORKSPACE_ALIGN == 0 for o in offsets)
    assert ws.size_bytes == 256 + 256 + 256
    assert (a.shape, b.shape, c.shape) == ((3,), (5, 7), (2, 2))
    assert (a.dtype, b.dtype, c.dtype) == (torch.float32, torch.bfloat16, torch.int64)
    b.fill_(1.0)
    a.fill_(2.0)
    assert bool((b == 1).all())  # no overlap between simultaneous views


def test_exact_multiple_is_not_padded() -> None:
    ws = Workspace("cpu")
    ws.get_simultaneous(((64,), torch.float32), ((64,), torch.float32))
    assert ws.size_bytes == 512


def test_grows_to_largest_single_call_never_shrinks() -> None:
    ws = Workspace("cpu")
    ws.get_simultaneous(((1000,), torch.uint8))
    assert (ws.size_bytes, ws.num_grows) == (1024, 1)
    ws.get_simultaneous(((300,), torch.uint8), ((300,), torch.uint8))  # 512 + 512
    assert (ws.size_bytes, ws.num_grows) == (1024, 1)  # the largest call, not the sum
    ws.get_simultaneous(((10,), torch.uint8))
    assert ws.size_bytes == 1024  # never shrinks
    ws.get_simultaneous(((5000,), torch.uint8))
    assert (ws.size_bytes, ws.num_grows) == (5120, 2)


def test_pointers_stable_for_same_or_smaller_calls() -> None:
    ws = Workspace("cpu")
    (x,) = ws.get_simultaneous(((128, 4), torch.float32))
    p = x.data_ptr()
    (y,) = ws.get_simultaneous(((128, 4), torch.float32))
    (z,) = ws.get_simultaneous(((16,), torch.float32))
    assert y.data_ptr() == p == z.data_ptr()
    (w,) = ws.get_simultaneous(((4096,), torch.float32))
    assert ws.num_grows == 2 and w.data_ptr() == ws.data_ptr()


def test_growth_while_locked_raises() -> None:
    ws = Workspace("cpu", name="ws")
    ws.get_simultaneous(((256,), torch.uint8))
    ws.lock()
    ws.get_simultaneous(((100,), torch.uint8))  # fits: fine
    with pytest.raises(WorkspaceLockedError, match="locked"):
        ws.get_simultaneous(((257,), torch.uint8))
    assert ws.size_bytes == 256  # no silent realloc
    ws.unlock()
    ws.get_simultaneous(((257,), torch.uint8))
    assert ws.size_bytes == 512


def test_locked_scope_restores_state() -> None:
    ws = Workspace("cpu")
    with ws.locked_scope():
        assert ws.locked
        with pytest.raises(WorkspaceLockedError):
            ws.get_simultaneous(((1,), torch.uint8))
    assert not ws.locked
    ws.get_simultaneous(((1,), torch.uint8))
    assert ws.size_bytes == 256


def test_empty_call() -> None:
    ws = Workspace("cpu")
    (e,) = ws.get_simultaneous(((0, 4), torch.float32))
    assert e.shape == (0, 4) and ws.size_bytes == 0
