"""memprof trace on the fake device (CPU, the allocator simulator) against the GPU traces of
reports/gpu/trace (an H200), and the command's phases, attribution, snapshot and exit codes."""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "reports" / "gpu" / "trace"
RUNS = json.loads((GOLDEN / "trace-runs.json").read_text())["runs"]
SAME_INPUTS = ("weights", "profile_run", "kv_cache")  # phases whose allocations are the same


def trace_json(*args: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["trace", *args, "-f", "json"])
    return code, (json.loads(out.getvalue()) if out.getvalue() else {}), err.getvalue()


def golden_flags(name: str) -> list[str]:
    cmd = RUNS[name]["command"].split()
    return cmd[cmd.index("trace") + 1: cmd.index("--device")]


@pytest.mark.parametrize("name", sorted(n for n in RUNS if not n.startswith("deepseek")))
def test_fake_device_gives_the_gpu_bytes(name: str) -> None:
    """The fake device replays the same replica through the allocator simulator: each phase's
    bytes are the H200's to the byte (the recordings and this run budget the same estimate)."""
    gpu = json.loads((GOLDEN / f"trace-{name}.json").read_text())
    code, fake, _ = trace_json(*golden_flags(name), "--device", "fake")
    assert code == 0 and fake["device"] == "fake"
    g = {c["name"]: c for c in gpu["components"]}
    for c in fake["components"]:
        if c["category"] in ("weights", "kv_cache", "scratch") or \
                c["name"] == "activation peak (profile run)":
            assert c["traced_bytes"] == g[c["name"]]["traced_bytes"], c["name"]
    gp = {p["name"]: p for p in gpu["phases"]}
    for p in fake["phases"]:
        if p["name"] in SAME_INPUTS:  # the simulator predicts torch's reserved exactly here
            assert (p["allocated_bytes"], p["reserved_bytes"]) == \
                (gp[p["name"]]["allocated_bytes"], gp[p["name"]]["reserved_bytes"]), p["name"]


def test_deepseek_r1_tp8_rank_weights_equal_the_gpu_trace() -> None:
    gpu = json.loads((GOLDEN / "trace-deepseek-r1-tp8-rank0-h200.json").read_text())
    code, fake, _ = trace_json(*golden_flags("deepseek-r1-tp8-rank0-h200"), "--device", "fake")
    assert code == 0
    # the tensors (the allocator's unsplit blocks, "allocator rounding (model load)", are a
    # weights component too, traced as allocated − tracked: not a tensor's bytes)
    def tensors(comps: list[dict[str, Any]], key: str) -> dict[str, int]:
        return {c["name"]: c[key] for c in comps if c["category"] == "weights"
                and c["name"] != "allocator rounding (model load)"}

    w, gw = tensors(fake["components"], "traced_bytes"), tensors(gpu["components"], "traced_bytes")
    est = sum(tensors(fake["components"], "estimated_bytes").values())
    # to the byte: 79.53 GiB of parameters + the 20 MiB MLA YaRN RoPE cache (4096 × 40 × 64 × 2 B)
    assert w == gw and sum(w.values()) == est == 85_395_983_392 + 20_971_520
    assert [p["name"] for p in fake["phases"]] == ["context", "weights", "profile_run",
                                                   "kv_cache", "cudagraph", "decode"]


def test_the_seed_001_buffers_live_per_layer_and_shared() -> None:
    base = ["-m", "qwen3-32b", "--gpu", "H200", "--kv-cache-dtype", "turboquant_k8v4",
            "--gpu-memory-utilization", "0.9", "--max-num-seqs", "256", "--graphs", "2",
            "--decode-steps", "1"]
    for scratch, bytes_ in (("per-layer", 60 * 278_986_752), ("shared", 278_986_752)):
        code, d, _ = trace_json(*base, "--scratch", scratch)
        assert code == 0
        c = next(x for x in d["components"] if x["name"].startswith("TurboQuant decode"))
        assert c["traced_bytes"] == c["estimated_bytes"] == bytes_


def test_an_oom_is_reported_with_its_phase_and_exit_1() -> None:
    code, d, err = trace_json("-m", "llama-3.1-8b", "--gpu-memory", "10GiB", "--gpu-arch", "sm90",
                               "--device", "fake")
    assert code == 1 and d["oom"]["phase"] == "weights"
    assert "error: CUDA out of memory in phase weights" in err and "Traceback" not in err


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--device", "tpu"], 2, "unknown --device"),
    (["--format", "xml"], 2, "unknown --format"),
    (["--rank", "99"], 2, "not a rank"),
    (["--gpu-memory", "80"], 2, "no unit"),
])
def test_bad_input_exits_2(args: list[str], code: int, needle: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        device = [] if "--device" in args else ["--device", "fake"]  # the case's own replaces it
        got = run(["trace", "-m", "qwen3-0.6b", *device, *args])
    assert got == code and needle in err.getvalue() and "Traceback" not in err.getvalue()


def test_no_gpu_with_device_cuda_exits_3() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    code, _, err = trace_json("-m", "qwen3-0.6b", "--device", "cuda")
    assert code == 3 and err.startswith("error: --device cuda: no CUDA GPU")


def test_without_torch_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(["trace", "-m", "qwen3-0.6b"])
    assert code == 3 and "needs PyTorch" in err.getvalue()


def test_snapshots_load_in_memory_viz_and_replay(tmp_path: Path) -> None:
    from torch.cuda import _memory_viz

    fake = tmp_path / "fake.pickle"
    code, _, _ = trace_json("-m", "qwen3-0.6b", "--gpu", "H200", "--max-num-seqs", "64",
                            "--graphs", "2", "--snapshot", str(fake))
    assert code == 0
    gpu = tmp_path / "gpu.pickle"
    gpu.write_bytes(gzip.decompress((GOLDEN / "qwen3-0.6b.pickle.gz").read_bytes()))
    for path in (fake, gpu):
        data = pickle.loads(path.read_bytes())
        assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert run(["alloc", "replay", str(path), "-f", "json"]) == 0
        assert json.loads(out.getvalue())["summary"]["allocated_peak_bytes"] > 1 << 30


def test_piecewise_capture_breaks_at_every_attention_layer() -> None:
    """vLLM's piecewise backend splits the forward at each attention op: the replica calls
    ``piece_break`` once per attention layer of the rank (L breaks → L + 1 pieces)."""
    import torch

    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate, rank_context
    from memprof.trace.replica import Replica

    for model, layers in (("qwen3-0.6b", 28), ("deepseek-r1", 61)):
        e = estimate(model, Deployment(tp=8 if model == "deepseek-r1" else 1), gpu_name="H200")
        rep = Replica(ctx=rank_context(e, e.ranks[0]), device=torch.device("cpu"),
                      charge=lambda _c: contextlib.nullcontext())
        breaks: list[int] = []
        rep.piece_break = functools.partial(breaks.append, 1)
        rep.forward(4, 0, decode=False)
        assert len(breaks) == layers
        rep.piece_break = None
        rep.forward(4, 0, decode=False)
        assert len(breaks) == layers


def test_progress_bar_names_phases_and_layers_and_is_off_for_json_and_pipes() -> None:
    from rich.console import Console

    from memprof.commands.trace import show_progress
    from memprof.core.deployment import Deployment
    from memprof.report.trace import progress
    from memprof.trace.run import run_trace

    assert show_progress("table", True)
    assert not show_progress("json", True) and not show_progress("table", False)
    seen: list[tuple[str, int, int]] = []
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with progress(True, console=console) as step:
        def both(p: str, d: int, t: int) -> None:
            seen.append((p, d, t))
            step(p, d, t)
        run_trace("qwen3-0.6b", Deployment(max_num_seqs=8), gpu_name="H200", device="fake",
                  max_graphs=1, decode_steps=1, progress=both)
    phases = [p for p, _, _ in seen if ":" not in p]
    assert phases == ["context", "weights", "profile_run", "kv_cache", "cudagraph", "decode"]
    assert ("profile_run: layer 28/28", 2, 6) in seen and ("decode: layer 1/28", 5, 6) in seen
    assert "trace: decode" in buf.getvalue()  # the final frame (intermediate ones are timed)
    with progress(False) as off:
        off("weights", 1, 6)  # disabled: a no-op


def test_collectives_run_over_a_real_process_group_gloo_world_of_one() -> None:
    """The replica's all-reduce goes through its communicator (here a torch group, gloo, a world
    of 1 on CPU, as ``memprof.trace.dist.default_group`` gives it); the output is a new tensor,
    as vLLM's out-of-place all-reduce."""
    import os
    import tempfile

    import torch
    import torch.distributed as dist

    from memprof.core.deployment import Deployment
    from memprof.core.estimate import estimate, rank_context
    from memprof.trace.dist import TorchGroup
    from memprof.trace.replica import Replica

    tmp = tempfile.mkdtemp()
    store = dist.FileStore(os.path.join(tmp, "store"), 1)  # no port to collide on
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        calls: list[int] = []
        real = dist.all_reduce

        def counting(t: torch.Tensor, *a: Any, **k: Any) -> Any:
            calls.append(t.numel())
            return real(t, *a, **k)

        e = estimate("qwen3-0.6b", Deployment(tp=2), gpu_name="H200")
        rep = Replica(ctx=rank_context(e, e.ranks[0]), device=torch.device("cpu"),
                      charge=lambda _c: contextlib.nullcontext(),
                      group=TorchGroup(dist.group.WORLD))
        x = torch.ones(3, 4)
        dist.all_reduce = counting  # type: ignore[assignment]
        try:
            y = rep.all_reduce(x)
            rep.forward(4, 0)
        finally:
            dist.all_reduce = real
        assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()  # world of 1: the sum is x
        assert calls[0] == 12 and len(calls) == 1 + 2 * 28  # attention + MLP of 28 layers
    finally:
        dist.destroy_process_group()


def test_torchrun_world_must_be_one_or_the_tp_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "3")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(["trace", "-m", "qwen3-0.6b", "-tp", "2", "--device", "fake"])
    assert code == 2
    assert "torchrun started 3 processes" in err.getvalue() and "hint:" in err.getvalue()


def test_pytorch_cuda_alloc_conf_must_be_the_traced_allocators(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--pytorch-cuda-alloc-conf sets the estimate's allocator; the trace refuses to put it beside
    a traced allocator run under another setting (the simulator's --alloc-conf, or the GPU
    process's PYTORCH_CUDA_ALLOC_CONF), and runs where the two are the same."""
    from memprof.base.errors import BadInput
    from memprof.commands.trace import _check_alloc_conf

    conf = "expandable_segments:True"
    code, _, err = trace_json("-m", "qwen3-0.6b", "--device", "fake", "--pytorch-cuda-alloc-conf",
                              conf)
    assert code == 2 and "Traceback" not in err
    assert "runs --alloc-conf (unset)" in err and f"hint: pass --alloc-conf {conf}" in err
    code, got, err = trace_json("-m", "qwen3-0.6b", "--device", "fake", "--graphs", "0",
                                "--decode-steps", "1", "--pytorch-cuda-alloc-conf", conf,
                                "--alloc-conf", conf)
    assert code == 0 and got, err
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    with pytest.raises(BadInput, match="PYTORCH_CUDA_ALLOC_CONF is unset"):
        _check_alloc_conf(conf, "", on_fake=False)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", conf)
    _check_alloc_conf(conf, "", on_fake=False)
    _check_alloc_conf(None, "max_split_size_mb:20", on_fake=True)  # the flag unset: no check


def test_the_graphs_traced_are_the_ones_the_estimate_sizes() -> None:
    # SGLang captures its own decode batch list (CudaGraphRunner's capture_bs), not vLLM's
    # capture sizes: the trace captures what the estimate's graph term sizes
    from memprof.core.deployment import Deployment
    from memprof.core.engines.sglang import SGLang
    from memprof.core.gpus import find_gpu

    code, out, err = trace_json("--model", "qwen3-0.6b", "--gpu", "H200", "--engine", "sglang",
                                "--engine-version", "0.5.9", "--device", "fake")
    assert code == 0, err
    dep = Deployment(engine="sglang", engine_version="0.5.9")
    sglang = SGLang().decode_graph_sizes(dep, find_gpu("H200"))
    assert sglang is not None and 12 in sglang and 512 not in sglang
    assert out["graph_sizes"] == sorted(sglang, reverse=True)
