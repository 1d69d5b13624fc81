"""An architecture memprof does not know: refused with an ``error:`` naming the families it knows
(exit 2), unless ``--assume-architecture dense-decoder`` opts into the generic dense decoder
(``memprof/core/models/families/dense_decoder.py``), whose assumption the estimate states in
table, JSON and markdown."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memprof.base.errors import ConfigError
from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.models import bundled_models, load_model, spec_from_config
from tests.cli_helpers import completed


def _unknown(tmp_path: Path) -> Path:
    cfg = json.loads(bundled_models()["llama-3.1-8b"].read_text())
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg["architectures"], cfg["model_type"] = ["FooBarForCausalLM"], "foobar"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return completed(["estimate", *args])


def test_unknown_architecture_names_the_known_families(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_model(str(_unknown(tmp_path)))
    assert "FooBarForCausalLM" in str(err.value)
    for family in ("llama (LlamaForCausalLM", "mixtral (MixtralForCausalLM)",
                   "phi3 (Phi3ForCausalLM)", "glm4_moe (Glm4MoeForCausalLM)"):
        assert family in str(err.value)
    assert "dense_decoder" not in str(err.value)  # not a family a config can name
    assert "--assume-architecture dense-decoder" in err.value.hint


def test_the_cli_refuses_with_one_error_and_one_hint(tmp_path: Path) -> None:
    run = _cli("--model", str(_unknown(tmp_path)), "--gpu", "H100")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["error", "hint"]


def test_the_generic_dense_decoder_reads_a_llama_config_as_llama(tmp_path: Path) -> None:
    spec = load_model(str(_unknown(tmp_path)), assume_architecture="dense-decoder")
    llama = load_model("llama-3.1-8b")
    assert (spec.family, spec.architecture) == ("dense_decoder", "FooBarForCausalLM")
    assert spec.layers == llama.layers
    dep = Deployment(assume_architecture="dense-decoder")
    est = estimate(spec, dep, gpu_name="H100")
    ref = estimate("llama-3.1-8b", Deployment(), gpu_name="H100")
    assert est.ranks[0].kv.num_gpu_blocks == ref.ranks[0].kv.num_gpu_blocks
    assert any("ASSUMED every layer GQA attention" in n for n in est.notes)
    assert not any("ASSUMED" in n for n in ref.notes)


def test_a_known_architecture_ignores_the_opt_in() -> None:
    est = estimate("qwen3-0.6b", Deployment(assume_architecture="dense-decoder"),
                   gpu_name="H100")
    assert est.spec.family == "qwen3" and not any("ASSUMED" in n for n in est.notes)


def test_an_unknown_assumption_is_refused(tmp_path: Path) -> None:
    cfg = json.loads(_unknown(tmp_path).read_text())
    with pytest.raises(ConfigError, match="unknown --assume-architecture"):
        spec_from_config(cfg, assume_architecture="moe-decoder")


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_every_format_states_the_assumption(tmp_path: Path, fmt: str) -> None:
    run = _cli("--model", str(_unknown(tmp_path)), "--gpu", "H100", "--assume-architecture",
               "dense-decoder", "--format", fmt)
    assert run.returncode == 0, run.stderr
    flat = " ".join(run.stdout.split())
    assert ("--assume-architecture dense-decoder: FooBarForCausalLM is not a family memprof "
            "knows; ASSUMED every layer GQA attention") in flat
