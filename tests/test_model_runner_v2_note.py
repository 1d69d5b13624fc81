"""vLLM 0.25.0-0.28.x run every generate model without routed experts or state mixers with Model
Runner V2 (``MODEL_RUNNER_V2_DEFAULT``); memprof charges V2's own profile terms there, with a cold
compile's autotuning example arguments (memprof/core/terms/cold_compile.py), and the estimate
says so."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.engines.vllm import MODEL_RUNNER_V2_DEFAULT
from memprof.core.estimate import estimate


def _v2_notes(model: str, dep: Deployment, gpu: str = "H100") -> list[str]:
    return [n for n in estimate(model, dep, gpu_name=gpu).notes if "Model Runner V2" in n]


@pytest.mark.parametrize("version", ["0.25.0", "0.26.0", "0.27.1", "0.28.0"])
def test_dense_model_is_noted_from_0_25_to_0_28(version: str) -> None:
    # 0.25.0 / 0.26.0 config/vllm.py _is_default_v2_model_runner_model: "... or not
    # model_config.is_moe"; 0.27.0 / 0.28.0: "return is_default_v2_architecture or not
    # model_config.is_moe" (Qwen3ForCausalLM is not a listed architecture)
    (note,) = _v2_notes("qwen3-32b", Deployment(tp=2, engine_version=version))
    assert note.startswith(f"vLLM {version} runs Qwen3ForCausalLM with Model Runner V2")
    assert "memprof charges V2's own profile terms" in note
    assert "autotuning example arguments" in note and "[approximation]" not in note


def test_not_outside_the_rows() -> None:
    # 0.21.0: V2 only with VLLM_USE_V2_MODEL_RUNNER=1 (0.24.0 lists Qwen3ForCausalLM: see
    # tests/test_vllm_runner.py)
    assert _v2_notes("qwen3-32b", Deployment(tp=2, engine_version="0.21.0")) == []


@pytest.mark.parametrize(("version", "late"), [("0.29.0", 0), ("0.31.0", 1), ("0.33.0", 2)])
def test_from_029_every_model_is_noted_with_what_is_not_modelled(version: str, late: int) -> None:
    # 0.29.0 on every model runs V2 and its profile run charges a CUDA-graph estimate of its
    # own (modelled: terms/runner_v2_graphs.py); 0.31.0 adds the allocator split limit (not
    # modelled), 0.33.0 a second sampler warm-up pass (modelled: vllm_runner
    # warmup_sampler_tensors)
    for model in ("qwen3-32b", "qwen3-235b-a22b-fp8"):
        notes = _v2_notes(model, Deployment(tp=2 if model == "qwen3-32b" else 4,
                                             engine_version=version))
        assert len(notes) == 1 and notes[0].startswith(f"vLLM {version} runs the model with "
                                                       "Model Runner V2")
        # a cold start: V2's own profile terms with the cold compile's example arguments, and
        # V2's own CUDA-graph estimate, at every release from 0.29.0
        assert "[approximation]" not in notes[0]
        assert "memprof charges V2's own profile terms" in notes[0]
        assert "V2's own CUDA-graph estimate" in notes[0]
        assert "autotuning example arguments" in notes[0]
        assert ("split limit" in notes[0]) is (late >= 1)
        assert ("for_sampler_warmup()" in notes[0]) is (late >= 2)
        assert "not modelled: the second sampler warm-up" not in notes[0]


def test_quantised_dense_models_are_noted_too() -> None:
    # 0.25.0+: "... or not model_config.is_moe", whatever the quantisation (rows 908/909)
    assert _v2_notes("qwen2.5-7b-instruct", Deployment(engine_version="0.27.1",
                                                       quantization="gptq"))


def test_moe_hybrid_v0_and_sglang_are_not_noted() -> None:
    # Qwen3MoeForCausalLM is MoE and not listed: V1 (row 904's log prints gpu_model_runner.py)
    assert _v2_notes("qwen3-235b-a22b-fp8", Deployment(tp=4, engine_version="0.27.1")) == []
    # NemotronH is hybrid (state mixers): 0.27.1 returns False for a non-listed hybrid
    assert _v2_notes("nemotron-h-8b-base-8k", Deployment(engine_version="0.27.1")) == []
    assert _v2_notes("qwen3-32b", Deployment(engine="sglang", tp=2)) == []


def test_row_902s_figure() -> None:
    dep = Deployment(tp=2, max_model_len=32768, gpu_memory_utilization=0.426,
                     engine_version="0.27.1")
    e = estimate("qwen3-32b", dep, gpu_name="RTX-PRO-6000")
    assert any("Model Runner V2" in n for n in e.notes)
    # published row 902's figure (67,296 tokens logged) as memprof gives it with V2's own terms
    # and the cold compile's table copy (memprof/core/terms/cold_compile.py); 56,096 with the
    # V1 runner's terms memprof charged before (55,632 before the stream-pool rule, 55,072
    # before the logits shard freed at the sampler and the driver's stack reservation for
    # sm120's NCCL kernel; 67,680 before the load's max_split_size_mb:20 rounding and
    # V2's output-copy stream pool, LOAD_MAX_SPLIT and V2_OUTPUT_COPY_STREAM; 67,120 before the
    # load's allocator holes that 0.27.0's total_consumed charges, reserved_charge.py; 67,088
    # before the sampler's logit-bias, bad-words and logprob-token-ids state, 18 MiB at R = 1024;
    # 66,912 before the TP communicator's PyNccl warm-up made torch's stream pool before the
    # snapshot, vLLM 0.14.0+: memprof/core/terms/pynccl_pool.py)
    assert e.ranks[0].kv.num_gpu_blocks * 16 == 67_472


def test_rule_range() -> None:
    # one row per release that changed _is_default_v2_model_runner_model's rule (read in the
    # 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.1, 0.28.0 and 0.29.0 wheels); the listed
    # architectures are the families' rows (Family.v2_runner_listed)
    assert [(r.since, r.until) for r in MODEL_RUNNER_V2_DEFAULT] == [
        ("0.21.0", "0.22.0"), ("0.22.0", "0.24.0"), ("0.24.0", "0.25.0"), ("0.25.0", "0.29.0"),
        ("0.29.0", None)]
    assert {r.engine for r in MODEL_RUNNER_V2_DEFAULT} == {"vllm"}
