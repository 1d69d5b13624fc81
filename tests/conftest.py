"""Shared test set-up: the ``slow`` marker of the tests the fast loop (``pytest -m "not slow"``)
skips, the ``gpu`` tests skipped where there is no CUDA GPU, and the ``--update-goldens`` option.

torch is imported only when a collected test is marked ``gpu`` (importing it takes seconds), so
a run of tests that need no GPU never pays for it.

The cyclic garbage collector is kept off the heap the tests share: a test process holds a large
long-lived heap (the test modules, the collected items, every published row's estimate once
made), and CPython's full collections walk all of it each time young objects pile up. Measured on
the whole suite, two workers, before this: about 5 s of each worker's 14 s collection and a fifth
of its test time went to those walks. So the collector is off while pytest collects, and what is
alive after collection and after each test module is moved out of its reach (``gc.freeze``,
after a full collection, so no garbage is frozen); objects a module makes are still collected as
usual until its last test ends.
"""

from __future__ import annotations

import gc
import importlib.util
from collections.abc import Generator

import pytest

SLOW: dict[str, str] = {
    # node id prefix (a file, a folder, or a file::function) → why it is slow
    "tests/test_fuzz.py": "hypothesis fuzzers of the CLI and of config mutations (~55 s)",
    "tests/test_fuzz_commands.py": "every command fuzzed from its own flags, in worker processes",
    "tests/probes/test_log_fuzz.py": "start-up log fuzzers",
    "tests/alloc/test_alloc_golden.py": "the GPU allocator goldens replayed op by op (~20 s)",
    "tests/kernels/": "the decode kernels under the Triton interpreter and their torch "
                      "references (~20 s)",
    "tests/trace/": "the tracer building ranks in torch on the fake device",
    "tests/test_term_memo.py::test_a_remembered_sweep_is_the_cold_estimate_wide":
        "a wide grid, each point estimated cold",
    "tests/test_sweep.py::test_plan_qwen3_32b_64x32k_h100_matches_brute_force":
        "plan against a brute-force sweep",
    "tests/test_sweep.py::test_plan_cli": "plan against a brute-force sweep, through the CLI",
    "tests/test_pictures.py::test_estimate_plot_writes_a_png_and_an_svg": "matplotlib",
    "tests/test_pictures.py::test_sweep_plot": "matplotlib",
}
"""The tests the fast loop leaves out (CI runs every test). Each is a node id prefix, so a whole
file or folder can be named; ``tests/test_fast_loop.py`` checks each still names a test. Doc
examples that need torch are marked in ``tests/test_readme.py``, and every test whose name starts
with ``test_fuzz`` is a fuzzer and slow."""


def is_slow(nodeid: str, name: str) -> bool:
    """Whether the test ``nodeid`` (function ``name``) is left out of the fast loop."""
    return name.startswith("test_fuzz") or any(
        nodeid == prefix or nodeid.startswith(prefix if prefix.endswith("/") else prefix + "::")
        or nodeid.startswith(prefix + "[") for prefix in SLOW)


def _has_gpu() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item.nodeid, getattr(item, "originalname", item.name)):
            item.add_marker(pytest.mark.slow)
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/ from the current output (review the diff)")


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    """Collects with the cyclic collector off, then freezes what collection left alive."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        _freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """After a test module's last test (its fixtures torn down), freezes what is still alive:
    the process's memos and caches, never scanned again by later full collections."""
    try:
        return (yield)
    finally:
        if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module",
                                                                                  None):
            _freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    gc.unfreeze()  # the interpreter's exit collects as usual


def _freeze() -> None:
    gc.collect()
    gc.freeze()
