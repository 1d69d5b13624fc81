"""The estimate's JSON ``deployment`` object echoes every setting of the deployment (docs/json.md):
a flag memprof reads but the JSON drops would leave a consumer of the contract unable to tell two
estimates apart."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from memprof.cli import run
from memprof.core.deployment import Deployment

# Deployment field -> its name in the JSON (vLLM's long names for the layout)
RENAMED = {"tp": "tensor_parallel_size", "pp": "pipeline_parallel_size",
           "dp": "data_parallel_size"}
DOC = Path(__file__).resolve().parents[1] / "docs" / "json.md"
# present only with --enable-lora (memprof/core/contract.py lora_fields), so that a deployment
# without LoRA keeps its JSON; tests/test_lora_term.py checks them with LoRA on
ONLY_WITH_LORA = {"enable_lora", "max_loras", "max_lora_rank", "lora_extra_vocab_size",
                  "lora_dtype", "fully_sharded_loras", "enable_lora_bias", "specialize_active_lora"}
# present only where not the default (a warm compile cache, an allocator setting, the pooling
# runner and the older --task, a speculative method and an EAGLE head), so a deployment
# without them keeps its JSON
ONLY_WHEN_SET = {"compile_cache", "pytorch_cuda_alloc_conf", "runner", "convert", "task",
                 "speculative_method", "speculative_model"}


def _deployment(capsys, *flags: str) -> dict[str, object]:  # type: ignore[no-untyped-def]
    assert run(["estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "-f", "json", *flags]) in (0, 1)
    return json.loads(capsys.readouterr()[0])["deployment"]  # type: ignore[no-any-return]


def test_every_deployment_field_is_in_the_json_and_its_doc(capsys) -> None:  # type: ignore[no-untyped-def]
    got = _deployment(capsys)
    doc = DOC.read_text(encoding="utf-8")
    for name in (f.name for f in fields(Deployment)):
        key = RENAMED.get(name, name)
        assert (key in got) != (key in ONLY_WITH_LORA | ONLY_WHEN_SET), key
        assert f"`{key}`" in doc or key in doc.split("```")[1], key


def test_settings_given_are_echoed(capsys) -> None:  # type: ignore[no-untyped-def]
    got = _deployment(capsys, "--disable-custom-all-reduce", "--hf-overrides",
                      '{"max_position_embeddings": 8192}')
    assert got["disable_custom_all_reduce"] is True
    assert got["hf_overrides"] == '{"max_position_embeddings": 8192}'
    assert _deployment(capsys)["disable_custom_all_reduce"] is False


def test_a_warm_compile_cache_is_echoed(capsys) -> None:  # type: ignore[no-untyped-def]
    assert "compile_cache" not in _deployment(capsys)
    assert _deployment(capsys, "--compile-cache", "warm")["compile_cache"] == "warm"
