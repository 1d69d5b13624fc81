"""SGLang's attention backend (memprof/core/engines/sglang_attention.py): which one each release
picks for the model and GPU, ``--attention-backend`` where given, and the capture state each
backend allocates for the decode CUDA graphs (inside "Capture cuda graph end … mem usage")."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import MiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_attention import capture_state, check_backend, default_backend
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu
from memprof.core.models import load_model
from tests.cli_helpers import completed


def _backend(model: str, version: str, gpu: str) -> str:
    dep = Deployment(engine="sglang", engine_version=version)
    return default_backend(dep, find_gpu(gpu), load_model(model))[0]


@pytest.mark.parametrize(("model", "version", "gpu", "want"), [
    # 0.4.3 server_args.py: flashinfer wherever it is installed, Hopper too
    ("qwen2.5-32b", "0.4.3", "H100", "flashinfer"),
    # 0.4.6 model_runner.py: fa3 on Hopper for the architectures is_fa3_default_architecture
    # lists; Qwen3ForCausalLM joined the list in 0.4.7
    ("qwen2.5-32b", "0.4.6", "H100", "fa3"),
    ("qwen3-32b", "0.4.6", "H100", "flashinfer"),
    ("qwen3-32b", "0.4.7", "H100", "fa3"),
    # Mixtral was never listed: flashinfer on Hopper until 0.5.8 ran fa3 for every MHA model
    ("mixtral-8x7b", "0.5.5", "H100", "flashinfer"),
    ("mixtral-8x7b", "0.5.8", "H100", "fa3"),
    # trtllm_mha on SM100 from 0.5.7 (row 1401's 0.5.5-era log: "Use flashinfer backend by
    # default"; row 1451's 0.5.10-era log: "Use trtllm_mha backend by default")
    ("qwen3-8b", "0.5.5", "B200", "flashinfer"),
    ("qwen3-8b", "0.5.7", "B200", "trtllm_mha"),
    # SM89 and SM120 (not is_sm100_supported): flashinfer
    ("qwen3-8b", "0.5.10", "L4", "flashinfer"),
    ("qwen3-8b", "0.5.10", "RTX PRO 6000 Blackwell Workstation Edition", "flashinfer"),
    # MLA: triton through 0.4.5, fa3 on Hopper from 0.4.6, flashinfer on SM100 from 0.4.7
    ("deepseek-r1", "0.4.3", "H100", "triton"),
    ("deepseek-r1", "0.4.6", "H100", "fa3"),
    ("deepseek-r1", "0.4.6", "B200", "triton"),
    ("deepseek-r1", "0.4.7", "B200", "flashinfer"),
])
def test_default_backend_per_release_and_gpu(model: str, version: str, gpu: str,
                                             want: str) -> None:
    assert _backend(model, version, gpu) == want


def test_flashinfer_state_is_index_buffers_and_a_decode_wrapper_per_size() -> None:
    # 13 sizes up to 80 on 4x L4 at 0.4.3; context 1,024: kv_indices 80 x 1,024 int32 (320 KiB)
    # and the custom mask (80 KiB) share one 2 MiB small segment; the 13 wrappers' 8 MiB int
    # workspaces pair up in 20 MiB segments (7 of them)
    dep = Deployment(engine="sglang", engine_version="0.4.3", tp=4, max_model_len=1024)
    sizes = [1, 2, 4, *range(8, 81, 8)]
    nbytes, what = capture_state(dep, find_gpu("L4"), load_model("qwen2.5-32b"), sizes)
    assert nbytes == 2 * MiB + 7 * 20 * MiB
    assert "flashinfer" in what and "13 decode wrappers" in what


def test_fa3_and_trtllm_state_is_one_page_table() -> None:
    spec = load_model("qwen3-32b")
    sizes = list(range(256, 0, -8))
    # page 1, context 40,960: [256, 40,960] int32 = 40 MiB, one segment of its own size
    fa3 = Deployment(engine="sglang", engine_version="0.5.19", max_model_len=40960)
    assert capture_state(fa3, find_gpu("H100"), spec, sizes)[0] == 40 * MiB
    # trtllm_mha runs pages of 64 (SGLang sets 64 for page 1): [256, 640] int32 = 640 KiB
    trt = fa3.with_(attention_backend="trtllm_mha")
    nbytes, what = capture_state(trt, find_gpu("B200"), spec, sizes)
    assert nbytes == 2 * MiB and "ceil(40,960 / 64)" in what and "--attention-backend" in what


def test_triton_state_holds_the_split_kv_logits() -> None:
    # 0.5.10: attn_logits [8, 64 heads, 8 splits, 128] fp32 (2 MiB) + lse (16 KiB) + kv_indices
    # [8 x 1,024] int64 (64 KiB) + mask (8 KiB)
    dep = Deployment(engine="sglang", engine_version="0.5.10", max_model_len=1024,
                     attention_backend="triton")
    nbytes, what = capture_state(dep, find_gpu("H100"), load_model("qwen3-32b"), [8, 4, 2, 1])
    assert "[8, 64, 8, 128] fp32" in what and "int64" in what
    assert nbytes == 20 * MiB + 2 * MiB  # 2 MiB of logits in a 20 MiB segment; the rest small


def test_an_unmodelled_backend_is_said_so() -> None:
    dep = Deployment(engine="sglang", engine_version="0.5.19", attention_backend="flashmla")
    nbytes, what = capture_state(dep, find_gpu("H200"), load_model("deepseek-r1"), [8])
    assert nbytes == 0 and "not modelled" in what


def test_the_graph_component_names_the_backend_and_charges_its_state() -> None:
    dep = Deployment(engine="sglang", engine_version="0.5.10", max_model_len=8192)
    base = estimate("qwen3-8b", dep.with_(attention_backend="trtllm_mha"), gpu_name="L4")
    fi = estimate("qwen3-8b", dep, gpu_name="L4")
    comp = {e: next(c for c in x.ranks[0].components if c.name == "CUDA-graph estimate")
            for e, x in (("trt", base), ("fi", fi))}
    assert "attention backend flashinfer (SGLang's default)" in comp["fi"].formula
    # one 8 MiB decode-wrapper workspace per captured size, at least
    assert comp["fi"].bytes - comp["trt"].bytes >= comp["fi"].count * 8 * MiB


def test_unknown_sglang_backend_is_refused() -> None:
    with pytest.raises(BadInput) as err:
        check_backend("flashattn")
    assert "fa3" in (err.value.hint or "")
    out = completed(["estimate", "--model", "qwen3-8b", "--gpu", "H100", "--engine", "sglang",
                     "--attention-backend", "flashattn"])
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("error: unknown SGLang --attention-backend")
    assert lines[1].startswith("hint: ")
