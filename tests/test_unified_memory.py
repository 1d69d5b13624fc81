"""The engines' free memory on a GPU that shares the host's memory
(memprof/core/engines/unified_memory.py). vLLM (``UMA_FREE_MEMORY``): from 0.11.1
``MemorySnapshot.measure`` reads the host's available memory on Orin/Thor/Spark (compute capability
8.7, 11.0, 12.1), from 0.20.0 on a card torch reports integrated. SGLang
(``SGLANG_UMA_FREE_MEMORY``): ``get_available_gpu_memory`` does the same from 0.5.4 (SM list), from
0.5.9 by ``is_integrated``. Before those releases the engines read ``torch.cuda.mem_get_info``,
whose free memory on an integrated part is the OS's (CUDA's ``cuMemGetInfo``). memprof states it on
the estimate and sizes nothing: the figures of a GB10 deployment are the same with and without the
rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines import unified_memory
from memprof.core.engines.unified_memory import (
    SGLANG_UMA_FREE_MEMORY,
    UMA_FREE_MEMORY,
    reads_host_memory,
    unified_memory_notes,
)
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu, resolve_gpu
from memprof.core.version_diff import all_rules


@pytest.mark.parametrize(("version", "expected"), [
    ("0.11.0", False),  # mem_get_info alone
    ("0.11.1", True), ("0.13.0", True), ("0.19.1", True),  # by compute capability 12.1
    ("0.20.0", True), ("0.33.0", True),  # by is_integrated
])
def test_gb10_reads_the_hosts_memory_from_0_11_1(version: str, expected: bool) -> None:
    assert reads_host_memory(find_gpu("GB10"), version) is expected


def test_discrete_cards_never_do() -> None:
    for name in ("H100-80GB", "RTX-5090", "GH200", "A100-40GB"):
        gpu = find_gpu(name)
        assert not gpu.integrated
        assert not any(reads_host_memory(gpu, v) for v in ("0.13.0", "0.20.0", "0.33.0")), name


def test_the_two_releases_recognise_the_part_differently() -> None:
    # 0.11.1-0.19.1 by capability alone: a card of capability 12.1 that torch did not report
    # integrated still reads the host's memory; from 0.20.0 only one torch reports integrated
    not_integrated = replace(find_gpu("GB10"), integrated=False)
    assert reads_host_memory(not_integrated, "0.13.0")
    assert not reads_host_memory(not_integrated, "0.20.0")
    sm120_integrated = replace(find_gpu("RTX-5090"), integrated=True)
    assert not reads_host_memory(sm120_integrated, "0.13.0")
    assert reads_host_memory(sm120_integrated, "0.20.0")


def test_a_custom_card_of_the_gb10s_architecture_is_integrated() -> None:
    gpu = resolve_gpu(None, 100 << 30, "sm121")
    assert gpu.integrated and gpu.compute_capability == "12.1"
    assert unified_memory_notes("0.13.0", gpu)


def _gb10_estimate(version: str, engine: str = "vllm") -> tuple[list[str], int]:
    dep = Deployment(engine=engine, engine_version=version, max_model_len=8192,
                     gpu_memory_utilization=0.25 if engine == "vllm" else None)
    e = estimate("gpt-oss-20b", dep, gpu=find_gpu("GB10"))
    return list(e.notes), e.ranks[0].kv.kv_cache_bytes


def test_the_estimate_states_it_and_sizes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    notes, kv = _gb10_estimate("0.13.0")
    said = [n for n in notes if "shares the host's memory" in n]
    assert len(said) == 1 and "vLLM 0.13.0" in said[0] and "upper bound" in said[0]
    monkeypatch.setattr(unified_memory, "UMA_FREE_MEMORY", ())
    notes_without, kv_without = _gb10_estimate("0.13.0")
    assert kv_without == kv  # stated, not sized
    # without the rule the release would read mem_get_info: that note instead
    assert not any("available memory" in n for n in notes_without)
    assert any("mem_get_info" in n for n in notes_without)


def test_before_the_release_the_note_names_mem_get_info(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0.11.0 reads torch.cuda.mem_get_info, which on an integrated part is the OS's free memory
    # (CUDA's cuMemGetInfo): host state too, without the page cache; stated, not sized
    notes, kv = _gb10_estimate("0.11.0")
    said = [n for n in notes if "shares the host's memory" in n]
    assert len(said) == 1 and "vLLM 0.11.0" in said[0] and "mem_get_info" in said[0]
    assert "page cache" in said[0] and "upper bound" in said[0]
    monkeypatch.setattr(unified_memory, "_os_free_note", lambda gpu, engine: [])
    notes_without, kv_without = _gb10_estimate("0.11.0")
    assert kv_without == kv
    assert not any("shares the host's memory" in n for n in notes_without)


def test_a_discrete_card_gets_no_note_at_any_release() -> None:
    for v in ("0.10.1", "0.11.0", "0.13.0", "0.33.0"):
        assert unified_memory_notes(v, find_gpu("H100-80GB")) == []
        assert unified_memory.sglang_unified_memory_notes("0.5.3", find_gpu("H200")) == []


def test_the_rows_are_in_the_rulebook_and_tile_the_releases() -> None:
    rules = all_rules()
    assert all(r in rules for r in (*UMA_FREE_MEMORY, *SGLANG_UMA_FREE_MEMORY))
    assert [(r.since, r.until) for r in UMA_FREE_MEMORY] == [("0.11.1", "0.20.0"),
                                                             ("0.20.0", None)]
    assert [(r.since, r.until) for r in SGLANG_UMA_FREE_MEMORY] == [("0.5.4", "0.5.9"),
                                                                    ("0.5.9", None)]


@pytest.mark.parametrize(("version", "expected"), [
    ("0.5.3", False), ("0.4.6", False),  # mem_get_info alone
    ("0.5.4", True), ("0.5.8", True),  # by SM 121
    ("0.5.9", True), ("main@d315eb7", True),  # by is_integrated, and the later snapshots
])
def test_sglang_reads_the_hosts_memory_on_a_gb10_from_0_5_4(version: str, expected: bool) -> None:
    assert reads_host_memory(find_gpu("GB10"), version, engine="sglang") is expected
    assert not reads_host_memory(find_gpu("H200"), version, engine="sglang")


def test_an_sglang_estimate_states_it_and_sizes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    notes, kv = _gb10_estimate("0.5.4", engine="sglang")
    said = [n for n in notes if "shares the host's memory" in n]
    assert len(said) == 1 and "SGLang 0.5.4" in said[0] and "upper bound" in said[0]
    monkeypatch.setattr(unified_memory, "SGLANG_UMA_FREE_MEMORY", ())
    notes_without, kv_without = _gb10_estimate("0.5.4", engine="sglang")
    assert kv_without == kv
    assert not any("available memory" in n for n in notes_without)
    before = [n for n in _gb10_estimate("0.5.3", "sglang")[0] if "shares the host's memory" in n]
    assert len(before) == 1 and "SGLang 0.5.3" in before[0] and "mem_get_info" in before[0]


def test_the_catalog_marks_integrated_parts_with_a_source() -> None:
    import json

    from memprof.core.models import configs_dir

    rows = json.loads((configs_dir() / "gpus.json").read_text(encoding="utf-8"))["gpus"]
    marked = [r for r in rows if r.get("integrated")]
    assert [r["name"] for r in marked] == ["GB10"]
    for r in marked:
        assert "is_integrated" in r["integrated_source"] and "https://" in r["integrated_source"]
        assert find_gpu(r["name"]).integrated
