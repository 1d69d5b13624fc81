"""The A800 80GB (configs/gpus.json A800-80GB): found by the names users type, an sm80 card, and
on vLLM's 70 GiB batch tier, which the A100's name keeps its own twin off (engines/vllm.py)."""

from __future__ import annotations

import pytest

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import find_gpu


@pytest.mark.parametrize(
    "typed", ["A800-80GB", "NVIDIA A800-SXM4-80GB", "a800 80gb", "A800-SXM4-80GB"])
def test_the_names_users_type(typed: str) -> None:
    g = find_gpu(typed)
    assert g.name == "A800-80GB" and g.arch == "sm80" and g.sm_count == 108
    assert g.device_name == "NVIDIA A800-SXM4-80GB"


def test_a_bare_a800_is_ambiguous_and_says_which() -> None:
    # an A800 40GB PCIe exists too: a bare "A800" is not guessed, the error names the entry
    from memprof.base.errors import BadInput

    with pytest.raises(BadInput) as e:
        find_gpu("A800")
    assert "A800-80GB" in (e.value.hint or "")


def test_vllm_batch_tier_by_driver_name() -> None:
    # 0.13.0 engine/arg_utils.py _set_default_args: >= 70 GiB and no 'a100' in the device name
    # gives vllm serve 8192 batched tokens and 1024 sequences; the A100 80GB stays at 2048 / 256
    dep = Deployment(engine_version="0.13.0")
    a800 = estimate("llama-3.1-8b", dep, gpu_name="A800-80GB")
    a100 = estimate("llama-3.1-8b", dep, gpu_name="A100-80GB")
    assert (a800.max_num_batched_tokens, a800.deployment.max_num_seqs) == (8192, 1024)
    assert (a100.max_num_batched_tokens, a100.deployment.max_num_seqs) == (2048, 256)
