"""vLLM's LoRA buffers (memprof/core/terms/lora.py) against hand counts from vLLM's source, the
LoRA settings' refusals (memprof/core/lora.py), and the readers of the flags (the CLI, a pasted
serve command, a log's ``args: Namespace(…)``)."""

from __future__ import annotations

import json

import pytest

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu
from memprof.probes.serve_command import parse_tokens
from memprof.probes.startup_log import parse_log

MiB = 1 << 20


def _lora(model: str, dep: Deployment, gpu: str = "H100") -> dict[str, int]:
    e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
    return {c.name: c.bytes for c in e.ranks[0].components if c.name.startswith("LoRA")}


def test_llama_3_1_8b_at_0_8_2_two_loras_rank_16() -> None:
    """0.8.2 lora/layers.py, Llama-3.1-8B (H 4096, 32 heads, 8 KV heads of 128, I 14336,
    32 layers, vocab 128256), max_loras 2, rank 16, bf16, TP1, on an A100-40GB as row 951 of
    tests/data/published.json (0.8.2's V1 defaults there: 2048 batched tokens, 1024 sequences;
    V1 with --enable-lora at 0.8.2 under VLLM_USE_V1=1, as that row ran)."""
    got = _lora("llama-3.1-8b", Deployment(engine_version="0.8.2", enable_lora=True,
                                           max_loras=2, max_lora_rank=16, vllm_use_v1=1),
                gpu="A100-40GB")
    n, r, h, i = 2, 16, 4096, 14336
    qkv = 3 * n * r * h + n * (4096 + 1024 + 1024) * r  # MergedQKV: 3 A, B per slice
    o = n * r * h + n * h * r  # RowParallel
    gate_up = 2 * n * r * h + 2 * n * i * r  # MergedColumn: 2 slices
    down = n * r * i + n * h * r
    assert got["LoRA stacked A/B buffers"] == 32 * 2 * (qkv + o + gate_up + down) == 160 * MiB
    v, x = 128256, 256
    embed = n * (v + x) * r * 2 + n * h * r * 2 + n * x * h * 2  # A, B, embeddings_tensors
    head = n * r * h * 2 + n * 128512 * r * 2 + n * x * h * 2  # B: ceil(128512/256)·256 rows
    assert got["LoRA embed_tokens / lm_head buffers"] == embed + head == 25_362_432
    # embed_tokens: 128256 + 256×2 rows (padded to 64: 128768); lm_head 128256 + 256 (256: 128512)
    assert got["LoRA extra vocabulary rows"] == (512 + 256) * h * 2 == 6 * MiB
    # int64 [2048] × 4 + [2, 2048], int64 [1024] × 3, int32 [2048] × 2 + [1024] × 2 (V1 prompts:
    # max_num_seqs 1024), and 2 × (two [3] + one [4] int32 counters: 512-B blocks)
    meta = 4 * 16384 + 32768 + 3 * 8192 + 2 * 8192 + 2 * 4096 + 2 * 3 * 512
    assert got["LoRA punica metadata"] == meta == 150_528
    # row 951 logged 15.1749 GiB: memprof's 14.9888 GiB of weights + these 190.33 MiB
    assert sum(got.values()) == 199_576_576


def test_mixtral_at_0_8_2_lora_on_attention_and_router_not_experts() -> None:
    """Mixtral-8x7B (H 4096, 32 heads, 8 KV heads, 8 experts, vocab 32000) at TP2, max_loras 1:
    the router is a ReplicatedLinear (LoRA'd); the FusedMoE experts are no LinearBase."""
    got = _lora("mixtral-8x7b", Deployment(engine_version="0.8.2", tp=2, enable_lora=True))
    r, h = 16, 4096
    qkv = 3 * r * h + (16 * 128 + 4 * 128 + 4 * 128) * r  # 16 query, 4 KV heads a rank
    o = r * (h // 2) + h * r
    gate = r * h * 2 + 512  # B [1, 1, 8, 16] bf16: 256 B in a 512-B block
    assert got["LoRA stacked A/B buffers"] == 32 * (2 * (qkv + o) + gate) == 26_230_784
    v, x = 32000, 256
    assert got["LoRA embed_tokens / lm_head buffers"] == 2 * (
        (v + x) * r * 2 + h * r * 2 + x * h * 2)  # lm_head B: 32256 rows (a multiple of 256)
    # embed 32000 + 256 rows and lm_head 32000 + 256, each split over TP2
    assert got["LoRA extra vocabulary rows"] == (128 + 128) * h * 2


def test_qwen3_before_0_16_has_no_embedding_lora() -> None:
    """Qwen3-0.6B (H 1024, 16 heads, 8 KV heads of 128, I 3072, 28 layers, tied) at 0.11.0:
    ``embedding_modules`` is empty, so embed_tokens and lm_head carry no LoRA and there is no
    extra vocabulary; every decoder linear does."""
    got = _lora("qwen3-0.6b", Deployment(engine_version="0.11.0", enable_lora=True))
    r, h, i = 16, 1024, 3072
    per_layer = (3 * r * h + r * (2048 + 1024 + 1024)  # qkv_proj
                 + r * 2048 + h * r  # o_proj: A over 16 heads × 128
                 + 2 * r * h + 2 * i * r + r * i + h * r)  # gate_up_proj, down_proj
    assert got["LoRA stacked A/B buffers"] == 28 * per_layer * 2 == 28 * 704 * 1024
    assert set(got) == {"LoRA stacked A/B buffers", "LoRA punica metadata"}


def test_fully_sharded_splits_the_rank_and_row_outputs() -> None:
    base = Deployment(engine_version="0.8.2", tp=2, enable_lora=True)
    plain = _lora("llama-3.1-8b", base)["LoRA stacked A/B buffers"]
    full = _lora("llama-3.1-8b", base.with_(fully_sharded_loras=True))["LoRA stacked A/B buffers"]
    r, h = 16, 4096
    # column A: r → r/2 (5 slices of H); row B: H → H/2 (o_proj, down_proj)
    saved = 5 * (r // 2) * h * 2 + 2 * (h // 2) * r * 2
    assert plain - full == 32 * saved  # the MLP's width i = 14336 does not enter the saving


def test_newest_release_has_no_extra_vocabulary() -> None:
    got = _lora("llama-3.1-8b", Deployment(enable_lora=True))
    assert "LoRA extra vocabulary rows" not in got
    # A [1, 128256, 16] + B [1, 1, 4096, 16]; lm_head A [1, 1, 16, 4096] + B [1, 1, 128256, 16]
    assert got["LoRA embed_tokens / lm_head buffers"] == 2 * (128256 * 16 * 2 + 4096 * 16 * 2)


def test_release_rows_on_each_side() -> None:
    """Rank 1 from 0.12.0 (MaxLoRARanks); the long-LoRA index [T] int64 gone at 0.10.0; V1's
    prompt metadata [max_num_seqs] × 2 int32 until 0.12.0, [max_num_batched_tokens] × 2 after."""
    assert _lora("llama-3.1-8b", Deployment(engine_version="0.12.0", enable_lora=True,
                                            max_lora_rank=1))
    meta = {v: _lora("llama-3.1-8b", Deployment(engine_version=v, enable_lora=True,
                                                max_num_batched_tokens=4096, max_num_seqs=256))
            ["LoRA punica metadata"] for v in ("0.9.0", "0.10.0", "0.11.0", "0.12.0")}
    assert meta["0.9.0"] - meta["0.10.0"] == 4096 * 8
    assert meta["0.10.0"] == meta["0.11.0"]
    assert meta["0.12.0"] - meta["0.11.0"] == 2 * (4096 - 256) * 4
    # 0.7.3 has no LoRAKernelMeta; V0 (0.8.2 on) sizes the prompts' by the tokens, as 0.12.0 V1
    old = {v: _lora("llama-3.1-8b", Deployment(engine_version=v, enable_lora=True,
                                               max_num_batched_tokens=4096, max_num_seqs=256))
           ["LoRA punica metadata"] for v in ("0.7.3", "0.9.0+v0")}
    kernel = 4 * 4096 * 4 + 2 * 3 * 512  # int32 [T] × 4 and the counters
    assert old["0.9.0+v0"] - old["0.7.3"] == kernel
    assert meta["0.9.0"] - old["0.9.0+v0"] == 2 * (256 - 4096) * 4


def test_lora_bias_adds_a_slot_beside_each_b() -> None:
    """0.8.2 lora/layers.py: lora_bias_stacked [L, 1, out] per slice, out the B's width."""
    base = Deployment(engine_version="0.8.2", enable_lora=True, max_loras=2)
    plain = _lora("llama-3.1-8b", base)["LoRA stacked A/B buffers"]
    bias = _lora("llama-3.1-8b", base.with_(enable_lora_bias=True))["LoRA stacked A/B buffers"]
    widths = (4096 + 1024 + 1024) + 4096 + 2 * 14336 + 4096  # qkv slices, o, gate/up, down
    # each slot [2, 1, width] bf16 is its own allocation: 512-B blocks (k, v: 4 KiB)
    assert bias - plain == 32 * 2 * 2 * widths


def test_without_lora_nothing() -> None:
    assert _lora("llama-3.1-8b", Deployment(engine_version="0.8.2", max_loras=4)) == {}


def test_lora_dtype_float32_model_bf16_sizes_by_the_lora_dtype() -> None:
    base = Deployment(engine_version="0.8.2", enable_lora=True)
    bf16 = _lora("llama-3.1-8b", base)["LoRA stacked A/B buffers"]
    fp16 = _lora("llama-3.1-8b", base.with_(lora_dtype="float16"))["LoRA stacked A/B buffers"]
    assert bf16 == fp16 == 80 * MiB


@pytest.mark.parametrize(("model", "flags", "says"), [
    ("llama-3.1-8b", ["--max-lora-rank", "7"], "--max-lora-rank 7"),
    ("llama-3.1-8b", ["--max-lora-rank", "1", "--engine-version", "0.11.0"], "--max-lora-rank 1"),
    ("llama-3.1-8b", ["--max-loras", "0"], "--max-loras"),
    ("llama-3.1-8b", ["--lora-extra-vocab-size", "300", "--engine-version", "0.8.2"],
     "--lora-extra-vocab-size 300"),
    ("llama-3.1-8b", ["--lora-extra-vocab-size", "256"], "has no such setting"),
    ("llama-3.1-8b", ["--lora-dtype", "float32"], "--lora-dtype"),
    ("llama-3.1-8b", ["--enable-lora-bias"], "--enable-lora-bias: vLLM 0.33.0 has no such"),
    ("llama-3.1-8b", ["--fully-sharded-loras", "--max-lora-rank", "8", "-tp", "16"],
     "--fully-sharded-loras"),
    ("mixtral-8x7b", ["--engine-version", "0.12.0"], "experts"),
    ("gemma-4-26b-a4b", [], "reads them for: llama"),
    ("deepseek-r1", [], "MLA attention projections and the experts"),
    ("qwen3-0.6b", ["--engine-version", "0.8.3"], "qwen3 family at 0.8.4 – before 0.16.0"),
])
def test_bad_lora_input_is_exit_2(capsys, model: str, flags: list[str], says: str) -> None:  # type: ignore[no-untyped-def]
    assert run(["estimate", "-m", model, "--gpu", "H200", "--enable-lora", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: ") and says in err[0], err
    assert err[1].startswith("hint: "), err


def test_sglang_has_no_such_flag(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang",
                "--enable-lora"]) == 2
    err = capsys.readouterr().err
    assert "error: --enable-lora is vLLM's flag" in err and "hint:" in err


def test_the_estimate_names_the_term_and_the_json_carries_the_settings(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "--enable-lora",
                "--max-loras", "4", "-f", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["deployment"]["enable_lora"] is True and d["deployment"]["max_loras"] == 4
    assert d["deployment"]["max_lora_rank"] is None  # vLLM's default (16)
    names = {c["name"] for c in d["ranks"][0]["components"]}
    assert {"LoRA stacked A/B buffers", "LoRA punica metadata"} <= names
    assert run(["estimate", "-m", "llama-3.1-8b", "--gpu", "H100", "--enable-lora"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the table wraps the headline
    assert "LoRA: 1 adapter, rank 16" in out and "LoRA stacked A/B buffers" in out


def test_a_pasted_serve_command_applies_the_lora_flags() -> None:
    cmd = parse_tokens(["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--enable-lora",
                        "--max-loras", "2", "--max-lora-rank", "64", "--max-cpu-loras", "8",
                        "--lora-modules", "a=/x", "--lora-dtype", "float16"])
    assert cmd.settings["enable_lora"] is True
    assert (cmd.settings["max_loras"], cmd.settings["max_lora_rank"]) == (2, 64)
    assert cmd.settings["lora_dtype"] == "float16"
    assert "max_cpu_loras" not in cmd.settings  # host memory: ignored
    bias = parse_tokens(["vllm", "serve", "m", "--enable-lora", "--enable-lora-bias"])
    assert bias.settings["enable_lora_bias"] is True and not bias.not_modelled


NAMESPACE = ("INFO 04-05 05:51:44 [api_server.py:982] args: Namespace(model='meta-llama/Llama-3.1"
             "-8B-Instruct', tensor_parallel_size=1, gpu_memory_utilization=0.9, {lora})\n"
             "INFO 04-05 05:52:54 [gpu_model_runner.py:1186] Model loading took 15.1749 GB and "
             "59.268527 seconds\n")


def test_a_log_namespace_gives_the_lora_settings_only_with_lora_on() -> None:
    on = parse_log(NAMESPACE.format(lora="enable_lora=True, enable_lora_bias=False, "
                                    "max_loras=2, max_lora_rank=16, lora_extra_vocab_size=256, "
                                    "lora_dtype='auto', max_cpu_loras=12, "
                                    "fully_sharded_loras=False"))
    assert on.settings["enable_lora"] is True
    assert (on.settings["max_loras"], on.settings["lora_extra_vocab_size"]) == (2, 256)
    non_default = parse_log("INFO 10-01 [utils.py:253] non-default args: {'model': 'meta-llama/"
                            "Llama-3.1-8B-Instruct', 'enable_lora': True, 'max_loras': 4, "
                            "'max_lora_rank': 64, 'fully_sharded_loras': True}\n")
    assert non_default.settings["enable_lora"] is True
    assert (non_default.settings["max_loras"], non_default.settings["max_lora_rank"]) == (4, 64)
    assert non_default.settings["fully_sharded_loras"] is True
    off = parse_log(NAMESPACE.format(lora="enable_lora=False, max_loras=1, max_lora_rank=16"))
    assert not {"enable_lora", "max_loras", "max_lora_rank"} & off.settings.keys()


def test_explain_of_a_lora_log_memprof_refuses_explains_the_rest(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A log is evidence: LoRA on a family whose LoRA layers memprof has not read is left out,
    with a note, and the log's figures are still compared (Kimi-Linear at 0.11.1, the first
    release whose model registry has KimiLinearForCausalLM: its family has no LoRA rows)."""
    log = tmp_path / "kimi-lora.log"
    log.write_text("INFO 04-05 05:51:44 [api_server.py:981] vLLM API server version 0.11.1\n"
                   + NAMESPACE.replace("meta-llama/Llama-3.1-8B-Instruct",
                                       "moonshotai/Kimi-Linear-48B-A3B-Instruct")
                   .format(lora="max_model_len=4096, enable_lora=True, max_loras=2"))
    assert run(["explain", str(log), "--gpu", "H200"]) in (0, 1)
    out = " ".join(capsys.readouterr().out.split())
    assert "the log turns LoRA on, which memprof leaves out here" in out
    assert "model load" in out


def test_before_0_8_the_manager_is_built_after_the_load_and_budgeted_nowhere() -> None:
    """0.7.3 worker/model_runner.py: create_lora_manager after the weights' profiler; utils.py
    memory_profiling: weights + the profile's peak over a snapshot taken after it. The extra
    vocabulary rows are the model's own tables (inside the load)."""
    dep = Deployment(engine_version="0.7.3", enable_lora=True)
    e = estimate("llama-3.1-8b", dep, gpu=resolve_gpu("H100", None))
    lora = {c.name: c for c in e.ranks[0].components if c.name.startswith("LoRA")}
    assert lora["LoRA extra vocabulary rows"].where == "budget"
    outside = [c for n, c in lora.items() if n != "LoRA extra vocabulary rows"]
    assert outside and all(c.where == "runtime" and not c.profiled for c in outside)
    at_080 = estimate("llama-3.1-8b", dep.with_(engine_version="0.8.0", vllm_use_v1=0),
                      gpu=resolve_gpu("H100", None))
    assert all(c.where == "budget" for c in at_080.ranks[0].components
               if c.name.startswith("LoRA"))


def test_trace_refuses_lora_it_does_not_build(capsys) -> None:  # type: ignore[no-untyped-def]
    assert run(["trace", "-m", "llama-3.1-8b", "--gpu", "H100", "--device", "fake",
                "--enable-lora"]) == 2
    err = capsys.readouterr().err
    assert "error: trace builds the model's own tensors and not vLLM's LoRA buffers" in err
    assert "hint:" in err


@pytest.mark.parametrize(("version", "x"), [("0.8.5", 256), ("0.11.0", 256), ("0.27.1", 0)])
def test_the_embedding_lora_is_whole_on_every_rank_at_tp2(version: str, x: int) -> None:
    """Llama-3.1-8B (H 4096, vocab 128256) at TP2, max_loras 2, rank 16, bf16.
    ``VocabParallelEmbeddingWithLoRA.create_lora_weights`` (0.8.5 lora/layers.py, 0.11.0 and
    0.27.1 lora/layers/vocal_parallel_embedding.py) sizes A by ``base_layer.org_vocab_size``
    (+ ``lora_extra_vocab_size`` before 0.12.0), the whole unpadded vocabulary
    (``VocabParallelEmbedding.org_vocab_size = org_num_embeddings or num_embeddings``), B and
    ``embeddings_tensors`` by ``embedding_dim``, the whole hidden size: its forward looks every
    token id up in A on each rank. ``LogitsProcessorWithLoRA`` sizes B by the whole
    ``vocab_size`` too. So the rank's buffers are TP1's: nothing here is divided by 2."""
    n, r, h, v = 2, 16, 4096, 128256
    got = _lora("llama-3.1-8b", Deployment(engine_version=version, tp=2, enable_lora=True,
                                           max_loras=n, max_lora_rank=r))
    embed = n * (v + x) * r * 2 + n * h * r * 2 + n * x * h * 2  # A, B, embeddings_tensors
    head_rows = 128512 if x else v  # ceil((V + x)/256)·256 while x exists; V from 0.12.0
    head = n * r * h * 2 + n * head_rows * r * 2 + n * x * h * 2
    assert got["LoRA embed_tokens / lm_head buffers"] == embed + head
    assert embed + head == (25_362_432 if x else 16_941_056)
