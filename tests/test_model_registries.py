"""The model registry of every vLLM and SGLang release memprof models
(``configs/vllm_architectures.json``, ``configs/sglang_architectures.json``, written by
``tools/vllm_architectures.py`` and ``tools/sglang_architectures.py`` from the wheels): an
architecture is refused at the release before its first and accepted from its first, for both
engines, before any estimate is built; the tools parse the registry files' real shapes."""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.engines import sglang_registry, vllm_registry
from memprof.core.engines.model_registry import read_releases
from memprof.core.models.load import configs_dir
from memprof.core.release_names import map_build
from memprof.core.releases import SGLANG_RELEASES, SGLANG_SNAPSHOTS, VLLM_RELEASES
from memprof.core.versions import version_key

TOOLS = Path(__file__).parents[1] / "tools"


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_modelled_release_is_read_in_order() -> None:
    """Each table reads every release memprof models (SGLang's source snapshots aside), oldest
    first, the refusal's hint naming the first in that order; SGLang's also reads the post
    releases memprof models at another ('modelled_at', as release_names.map_build maps them)."""
    for name, releases in (("vllm_architectures.json", VLLM_RELEASES),
                           ("sglang_architectures.json",
                            tuple(r for r in SGLANG_RELEASES if r not in SGLANG_SNAPSHOTS))):
        doc = json.loads((configs_dir() / name).read_text(encoding="utf-8"))
        read = list(doc["releases"])
        assert read == sorted(read, key=version_key), name
        at = doc.get("modelled_at", {})
        assert [r for r in read if r not in at] == list(releases), name
        for post, base in at.items():
            mapped = map_build(post, "sglang")
            assert mapped is not None and mapped.release == base, post
        assert "range requests" in doc["_source"], name
        assert all(doc["releases"].values()), name


@pytest.mark.parametrize(("engine", "model", "arch", "before", "first", "hinted"), [
    ("vllm", "deepseek-v3.2", "DeepseekV32ForCausalLM", "0.10.2", "0.11.0", "0.11.0"),
    ("vllm", "gpt-oss-120b", "GptOssForCausalLM", "0.10.0", "0.10.1", "0.10.1"),
    ("vllm", "qwen3-32b", "Qwen3ForCausalLM", "0.8.3", "0.8.4", "0.8.4"),
    ("vllm", "qwen3-next-80b-a3b-instruct", "Qwen3NextForCausalLM", "0.10.1.1", "0.10.2",
     "0.10.2"),
    ("vllm", "llama-4-scout-17b-16e-instruct", "Llama4ForConditionalGeneration", "0.8.2",
     "0.8.3", "0.8.3"),
    # qwen3.py is first in 0.4.5.post2's wheel, which --engine-version models at 0.4.5
    ("sglang", "qwen3-32b", "Qwen3ForCausalLM", "0.4.4", "0.4.5", "0.4.5.post2"),
    ("sglang", "deepseek-v3.2", "DeepseekV32ForCausalLM", "0.5.2", "0.5.3", "0.5.3"),
    ("sglang", "gpt-oss-120b", "GptOssForCausalLM", "0.4.10", "0.5.1", "0.5.1"),
])
def test_refused_before_its_first_release_and_accepted_from_it(
        engine: str, model: str, arch: str, before: str, first: str, hinted: str) -> None:
    registry = vllm_registry if engine == "vllm" else sglang_registry
    assert arch not in (registry.registered(before) or ())
    assert arch in (registry.registered(first) or ())
    with pytest.raises(BadInput) as err:
        registry.check_registered(before, arch, model)
    assert arch in str(err.value) and before in str(err.value)
    assert err.value.hint == f"use --engine-version {hinted} or later"
    registry.check_registered(first, arch, model)


def test_a_post_release_memprof_maps_to_its_base_lends_it_its_models() -> None:
    """SGLang 0.4.5's own wheel has no qwen3.py; 0.4.5.post2's has, and --engine-version
    0.4.5.post2 is modelled at 0.4.5 (release_names.map_build), so 0.4.5 loads Qwen3."""
    own = read_releases("sglang_architectures.json")
    assert "Qwen3ForCausalLM" not in own["0.4.5"]
    assert "Qwen3ForCausalLM" in own["0.4.5.post2"]
    assert map_build("0.4.5.post2", "sglang") is not None
    assert map_build("0.4.5.post2", "sglang").release == "0.4.5"  # type: ignore[union-attr]
    assert run(["estimate", "-m", "qwen3-32b", "--gpu", "H100", "--engine", "sglang",
                "--engine-version", "0.4.5.post2"]) == 0


def test_the_cli_refuses_in_one_line_before_any_estimate(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["estimate", "-m", "deepseek-v3.2", "--gpu", "H200", "--tp", "8",
                "--engine-version", "0.10.2"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: vLLM 0.10.2 cannot load deepseek-v3.2: its model registry "
        "(model_executor/models/) has no DeepseekV32ForCausalLM",
        "hint: use --engine-version 0.11.0 or later"]
    assert run(["estimate", "-m", "qwen3-32b", "--gpu", "H100", "--engine", "sglang",
                "--engine-version", "0.4.4"]) == 2
    err = capsys.readouterr().err
    assert "SGLang 0.4.4 cannot load qwen3-32b" in err and "Qwen3ForCausalLM" in err
    assert "hint: use --engine-version 0.4.5.post2 or later" in err and "Traceback" not in err


def test_a_config_file_is_refused_by_its_architecture(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = json.loads((configs_dir() / "models" / "qwen3-0.6b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert run(["estimate", "-m", str(path), "--gpu", "H100", "--engine-version", "0.8.3"]) == 2
    err = capsys.readouterr().err
    assert "has no Qwen3ForCausalLM" in err and "0.8.4 or later" in err


def test_an_architecture_vllm_removed_points_back() -> None:
    """vLLM lists removed architectures in _PREVIOUSLY_SUPPORTED_MODELS (0.10.0 on), which the
    tool leaves out: Phi3SmallForCausalLM's last registry is 0.9.2's."""
    assert "Phi3SmallForCausalLM" in (vllm_registry.registered("0.9.2") or ())
    assert "Phi3SmallForCausalLM" not in (vllm_registry.registered("0.10.0") or ())
    with pytest.raises(BadInput) as err:
        vllm_registry.check_registered("0.10.0", "Phi3SmallForCausalLM", "phi-3-small")
    assert err.value.hint is not None and "0.9.2 or earlier" in err.value.hint


def test_a_seq_cls_checkpoint_loads_converted_from_0_10_1() -> None:
    """registry.py _normalize_arch (0.10.1's wheel on; not 0.10.0's): an unregistered
    *ForSequenceClassification loads as its registered causal LM."""
    assert "Qwen3ForSequenceClassification" not in (vllm_registry.registered("0.11.0") or ())
    vllm_registry.check_registered("0.11.0", "Qwen3ForSequenceClassification", "reranker")
    with pytest.raises(BadInput):
        vllm_registry.check_registered("0.10.0", "FooForSequenceClassification", "x")


def test_sglang_snapshots_are_not_checked() -> None:
    for snapshot in SGLANG_SNAPSHOTS:
        assert sglang_registry.registered(snapshot) is None
        sglang_registry.check_registered(snapshot, "NoSuchForCausalLM", "x")


def test_the_vllm_tool_skips_removed_and_plugin_models() -> None:
    tool = _tool("vllm_architectures")
    source = (
        '_TEXT_GENERATION_MODELS = {\n    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n'
        '    "GptOssForCausalLM": ("gpt_oss", "GptOssForCausalLM"),\n}\n'
        '_VLLM_MODELS = {**_TEXT_GENERATION_MODELS}\n'
        '_PREVIOUSLY_SUPPORTED_MODELS = {"Phi3SmallForCausalLM": "0.9.2"}\n'
        '_OOT_SUPPORTED_MODELS = {"BartModel": "https://github.com/vllm-project/bart-plugin"}\n')
    assert tool.registry_keys(source) == ["GptOssForCausalLM", "LlamaForCausalLM"]


def test_the_sglang_tool_keys_entry_classes_by_class_name() -> None:
    """import_model_classes keys a class by its __name__: an alias or an import names the class
    it is bound to; sub-packages and helper modules without EntryClass add nothing."""
    tool = _tool("sglang_architectures")
    files = {
        "qwen3.py": "class Qwen3ForCausalLM(nn.Module):\n    pass\n\n"
                    "EntryClass = Qwen3ForCausalLM\n",
        "llama.py": "class LlamaForCausalLM:\n    pass\n\nclass Phi3ForCausalLM(LlamaForCausalLM):"
                    "\n    pass\n\nEntryClass = [LlamaForCausalLM, Phi3ForCausalLM]\n",
        "dots3.py": "from sglang.srt.models.dots3_common.modeling import (\n"
                    "    Dots3NoteForCausalLM as Note,\n)\nAlias = Note\nEntryClass = [Alias]\n",
        "siglip.py": "class SiglipVisionModel:\n    pass\n",
        "registry.py": "EntryClass = NotAModel\n",
        "deepseek_common/modeling.py": "EntryClass = Hidden\n",
    }
    assert tool.architectures(files) == [
        "Dots3NoteForCausalLM", "LlamaForCausalLM", "Phi3ForCausalLM", "Qwen3ForCausalLM"]


def test_range_reads_open_a_wheel_without_reading_it_all() -> None:
    """tools/pypi_wheel.py RangeFile under zipfile: the central directory and one member are
    read, not the whole archive (the fetch is stubbed with a slice of a zip built here)."""
    wheel = _tool("pypi_wheel")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("vllm/big.bin", bytes(range(256)) * 4096)  # 1 MiB nobody reads
        z.writestr("vllm/model_executor/models/registry.py", "_TEXT_GENERATION_MODELS = {}\n")
    data = buf.getvalue()

    class Local(wheel.RangeFile):  # type: ignore[misc,name-defined]
        def _get(self, start: int, end: int) -> bytes:
            self.fetched += end - start
            return data[start:end]

    f = Local("local", len(data))
    with zipfile.ZipFile(f) as z:
        assert z.read("vllm/model_executor/models/registry.py") == (
            b"_TEXT_GENERATION_MODELS = {}\n")
    assert 0 < f.fetched < len(data) // 4
