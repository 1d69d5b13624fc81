"""vLLM's ``--max-model-len auto`` (memprof/core/auto_fit.py): profiled at the derived length,
fitted after profiling to the longest request the KV cache holds, per release: the whole model's
groups in 0.14.0-0.16.x, each worker's from 0.17.0, the null block held back from 0.29.0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.errors import BadInput
from memprof.core.auto_fit import AUTO_FIT, fit_mode, holds_back_null_block, longest_fitting
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.flags import coerce
from tests.cli_helpers import invoke, one_error

DERIVED = 40960  # Qwen3-8B's max_position_embeddings


def _est(version: str, gpu: str = "RTX-4090", **kw: object) -> object:
    return estimate("qwen3-8b", Deployment(engine_version=version, max_model_len=AUTO_FIT,
                                           **kw),  # type: ignore[arg-type]
                    gpu_name=gpu)


@pytest.mark.parametrize("version", ["0.14.0", "0.20.0", "0.28.0", "0.29.0", "0.33.0"])
def test_the_fit_is_the_longest_request_the_checked_memory_holds(version: str) -> None:
    e = _est(version)
    r = e.ranks[0]  # type: ignore[attr-defined]
    plan, mnbt = r.plan, e.max_num_batched_tokens  # type: ignore[attr-defined]
    held = plan.block_bytes if holds_back_null_block(version, "vllm") else 0
    usable = r.available_kv_bytes - held
    fitted = e.max_model_len  # type: ignore[attr-defined]
    assert e.auto_fit_from == DERIVED and 0 < fitted < DERIVED  # type: ignore[attr-defined]
    assert plan.request_bytes(fitted, mnbt) <= usable < plan.request_bytes(fitted + 1, mnbt)
    # the pool is sized from the budget, as without the flag: the blocks are those of a
    # deployment that asks for the fitted length outright
    plain = estimate("qwen3-8b", Deployment(engine_version=version, max_model_len=fitted),
                     gpu_name="RTX-4090")
    assert r.kv.num_gpu_blocks >= plain.ranks[0].kv.num_gpu_blocks
    # uniform 16-token blocks: the whole pool, less the null block from 0.29.0
    blocks = r.kv.num_gpu_blocks - (1 if held else 0)
    assert fitted == blocks * plan.block_size
    assert e.verdict == "fits"  # type: ignore[attr-defined]


def test_the_null_block_is_held_back_from_0_29_0() -> None:
    assert not holds_back_null_block("0.28.0", "vllm")
    assert holds_back_null_block("0.29.0", "vllm") and holds_back_null_block("0.33.0", "vllm")
    assert not holds_back_null_block("0.5.5", "sglang")


def test_a_model_whose_whole_context_fits_keeps_it() -> None:
    e = _est("0.33.0", gpu="H100")
    assert e.max_model_len == DERIVED == e.auto_fit_from  # type: ignore[attr-defined]
    assert any("full model context length 40960 fits" in n
               for n in e.notes)  # type: ignore[attr-defined]


def test_the_releases_before_0_17_fit_the_whole_model_against_one_worker() -> None:
    assert fit_mode("0.14.0") == fit_mode("0.16.0") == "global"
    assert fit_mode("0.17.0") == fit_mode("0.33.0") == "per_worker"
    whole = _est("0.16.0", pp=2, gpu_memory_utilization=0.45)
    own = _est("0.17.0", pp=2, gpu_memory_utilization=0.45)
    # two stages of 18 layers: the whole model's request is twice a stage's
    r = whole.ranks[0]  # type: ignore[attr-defined]
    stages = {x.coord.pp_stage: x.plan for x in whole.ranks}  # type: ignore[attr-defined]
    mnbt = whole.max_num_batched_tokens  # type: ignore[attr-defined]
    need = lambda n: sum(p.request_bytes(n, mnbt) for p in stages.values())  # noqa: E731
    usable = min(x.available_kv_bytes for x in whole.ranks)  # type: ignore[attr-defined]
    assert whole.max_model_len == longest_fitting(need, usable, DERIVED)  # type: ignore[attr-defined]
    assert need(whole.max_model_len) <= usable < need(whole.max_model_len + 1)  # type: ignore[attr-defined]
    # each stage holds half the layers: its own fit is about twice the whole model's
    assert own.max_model_len > 1.8 * whole.max_model_len  # type: ignore[attr-defined]
    assert r.kv.max_concurrency > 1.8  # so the pool holds about two fitted requests at 0.16.0


def test_no_length_fits_is_a_start_up_failure() -> None:
    # one block's pool at 0.33.0: the null block leaves nothing a request of one token fits in
    e = estimate("qwen3-8b", Deployment(engine_version="0.33.0", max_model_len=AUTO_FIT,
                                        kv_cache_memory_bytes=3 * 1024 * 1024),
                 gpu_name="H100")
    assert e.verdict == "startup_oom"
    assert any("Cannot auto-fit max_model_len" in x for x in e.reasons)


@pytest.mark.parametrize(("argv", "said"), [
    (["--engine-version", "0.13.0", "--max-model-len", "auto"], "arrived in vLLM 0.14.0"),
    (["--engine", "sglang", "--context-length", "auto"], "SGLang's --context-length"),
    (["--max-num-batched-tokens", "auto"], "takes auto only for --max-model-len"),
])
def test_auto_where_the_engine_has_none_is_refused(argv: list[str], said: str) -> None:
    code, out, err = invoke(["estimate", "-m", "qwen3-8b", "--gpu", "H100", *argv])
    assert code == 2 and out == ""
    one_error(err, said)


def test_compare_and_scenarios_read_auto() -> None:
    assert coerce("max_model_len", "auto", where="--compare") == AUTO_FIT
    assert coerce("max_model_len", "AUTO", where="--compare") == AUTO_FIT
    with pytest.raises(BadInput):
        estimate("qwen3-8b", Deployment(max_num_batched_tokens=AUTO_FIT), gpu_name="H100")


def test_explain_reads_the_auto_fit_line(tmp_path: Path) -> None:
    fitted = _est("0.20.0").max_model_len  # type: ignore[attr-defined]
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 03-01 10:00:00 [api_server.py:1] vLLM API server version 0.20.0\n"
        "INFO 03-01 10:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3-8B'}\n"
        "INFO 03-01 10:00:40 [kv_cache_utils.py:1] Auto-fit max_model_len: reduced from 40960 "
        f"to {fitted} to fit in available GPU memory (4.53 GiB available for KV cache)\n"
        f"INFO 03-01 10:00:40 [kv_cache_utils.py:1] Maximum concurrency for {fitted:,} tokens "
        "per request: 1.00x\n")
    code, out, err = invoke(["explain", str(log), "--model", "qwen3-8b", "--gpu", "RTX-4090",
                             "-f", "json"])
    assert code == 0, err
    got = json.loads(out)
    rows = {r["key"]: r for r in got["figures"]}
    # the concurrency line's length is the fitted one: the rebuild profiles at the derived
    # length and fits the same, not a deployment that asked for the fitted length
    assert rows["auto_fit_max_model_len"]["estimated"] == fitted
    assert rows["max_concurrency"]["reproduced"]
    assert got["deployment"]["max_model_len"] == fitted


def test_a_sweep_fits_each_point_as_its_estimate_does() -> None:
    code, out, err = invoke(["sweep", "-m", "qwen3-8b", "--gpu", "RTX-4090", "-f", "json",
                             "--set", "max_model_len=auto,32k",
                             "--set", "gpu_memory_utilization=0.8,0.9"])
    assert code in (0, 1), err
    rows = [r for r in json.loads(out) if r["max_model_len"] != 32000]
    assert len(rows) == 2  # the auto points, each fitted
    for row in rows:
        alone = estimate("qwen3-8b", Deployment(max_model_len=AUTO_FIT,
                                                gpu_memory_utilization=row[
                                                    "gpu_memory_utilization"]),
                         gpu_name="RTX-4090")
        assert row["max_model_len"] == alone.max_model_len < DERIVED
        assert row["verdict"] == alone.verdict == "fits"


def test_the_search_takes_no_length_from_an_empty_range() -> None:
    assert longest_fitting(lambda n: n, 10, 0) == 0
    assert longest_fitting(lambda n: n, 10, 1) == 1
    assert longest_fitting(lambda n: 8 * n, 100, 1_000) == 12
    assert longest_fitting(lambda n: 8 * n, 7, 1_000) == 0


@pytest.mark.parametrize(("kv", "gpu"), [("3MiB", "H100"), (None, "RTX-4090")])
def test_the_printed_lengths_agree_where_no_length_fits(kv: str | None, gpu: str) -> None:
    # nothing fits: the headline says so (no 'max_model_len 0'), the concurrency line is for the
    # length one request's KV was sized at, and the note does not claim a fitted length is read
    argv = ["estimate", "--model", "qwen3-8b", "--gpu", gpu, "--max-model-len", "auto",
            *(["--kv-cache-memory", kv] if kv else ["--gpu-memory-utilization", "0.2"])]
    code, out, _ = invoke(argv)
    assert code == 1
    flat = " ".join(out.split())  # the table wraps at the terminal's width
    assert "max_model_len 0" not in flat
    assert f"auto (no length fits; derived {DERIVED})" in flat
    assert f"Maximum concurrency for {DERIVED:,} tokens per request" in flat
    assert "no length fits ('Cannot auto-fit max_model_len')" in flat
    assert "read the fitted length" not in flat
    assert "the concurrency is for one request of the derived length" in flat


@pytest.mark.parametrize(("extra", "says_auto"), [
    ([], True), (["--engine-version", "0.13.0"], False), (["--engine", "sglang"], False)])
def test_a_length_below_one_names_auto_where_the_release_reads_it(extra: list[str],
                                                                  says_auto: bool) -> None:
    code, _out, err = invoke(["estimate", "--model", "qwen3-8b", "--gpu", "H100",
                              "--max-model-len" if "sglang" not in extra else "--context-length",
                              "0", *extra])
    assert code == 2
    hint = err.strip().splitlines()[-1]
    assert hint.startswith("hint: use a value in [1,") and ("or auto" in hint) is says_auto
