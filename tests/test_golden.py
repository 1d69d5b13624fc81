"""Golden output: the table, Markdown and JSON of a few deployments compared whole with committed
files (tests/golden/), at a pinned width with no colour. A changed digit fails; after a change
you mean, regenerate with ``pytest tests/test_golden.py --update-goldens`` and review the diff.

Also: the README's JSON example is what the tool prints, and every command's options are frozen.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from memprof.cli import parser_of, run
from memprof.commands import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"

DEPLOYMENTS = {
    "qwen3-0.6b-h100": ["-m", "qwen3-0.6b", "--gpu", "H100"],
    "deepseek-r1-tp8-h200": ["-m", "deepseek-r1", "--gpu", "H200", "-tp", "8"],
    "qwen3-32b-tq-per-layer-h200": ["-m", "qwen3-32b", "--gpu", "H200", "--kv-cache-dtype",
                                    "turboquant_k8v4", "--gpu-memory-utilization", "0.9",
                                    "--max-num-seqs", "256", "--scratch", "per-layer",
                                    "--compare", "scratch=shared"],
    "deepseek-v3-sglang-dp-attention": ["-m", "deepseek-v3", "--gpu", "H200", "--engine",
                                        "sglang", "--tp", "8", "--dp", "8",
                                        "--enable-dp-attention"],
}
FORMATS = {"table": "txt", "markdown": "md", "json": "json"}


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output that is not a terminal is $COLUMNS wide when set: the goldens are 100 wide."""
    monkeypatch.delenv("COLUMNS", raising=False)


def render(args: list[str], fmt: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = run(["estimate", *args, "-f", fmt])
    assert code in (0, 1)
    return out.getvalue()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_golden_output(name: str, fmt: str, request: pytest.FixtureRequest) -> None:
    text = render(DEPLOYMENTS[name], fmt)  # stdout is not a terminal: 100 columns, no colour
    path = GOLDEN / f"{name}.{FORMATS[fmt]}"
    if request.config.getoption("--update-goldens"):
        path.write_text(text, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path.name} changed; rerun with --update-goldens if intended"
    if fmt == "table":
        assert max(len(line) for line in text.splitlines()) <= 100
        assert "\x1b[" not in text


def test_golden_fails_on_a_changed_digit(tmp_path: Path) -> None:
    text = render(DEPLOYMENTS["qwen3-0.6b-h100"], "json")
    golden = (GOLDEN / "qwen3-0.6b-h100.json").read_text(encoding="utf-8")
    changed = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), golden, count=1)
    assert text == golden and text != changed


def test_the_readme_json_example_is_what_the_tool_prints() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"memprof estimate (--model qwen3-0\.6b [^|\n]*) --format json \| jq \.summary"
                  r"\n```\n\n```json\n(.*?)```", readme, flags=re.S)
    assert m, "the README's JSON example is missing"
    shown = json.loads(m.group(2))
    printed = json.loads(render(m.group(1).split(), "json"))["summary"]
    assert shown == printed


OPTIONS = {
    # memprof's deployment flags, then one per memprof.core.flags.SETTINGS row, in its order
    "estimate": ["--model/-m/--model-path", "--gpu", "--gpu-memory", "--gpu-arch", "--engine",
                 "--engine-version", "--entrypoint",
                 "-tp/--tensor-parallel-size/--tp/--tp-size", "-pp/--pipeline-parallel-size/"
                 "--pp-size", "-dp/--data-parallel-size/--dp/--dp-size",
                 "--enable-expert-parallel", "--dtype", "--hf-overrides/--json-model-override-args",
                 "--assume-architecture", "--limit-mm-per-prompt", "--mm-processor-kwargs",
                 "--mm-encoder-tp-mode", "--runner", "--convert", "--task",
                 "--quantization/-q", "--kv-cache-dtype",
                 "--max-model-len/--context-length", "--max-num-seqs/--max-running-requests",
                 "--max-num-batched-tokens", "--gpu-memory-utilization",
                 "--block-size/--page-size", "--kv-cache-memory-bytes/--kv-cache-memory",
                 "--gpu-memory-in-use",
                 "--enforce-eager/--disable-cuda-graph", "--disable-custom-all-reduce",
                 "--no-gpu-peer-access", "--nnodes",
                 "--disable-hybrid-kv-cache-manager", "--enable-prefix-caching",
                 "--mamba-cache-mode",
                 "--num-speculative-tokens", "--speculative-method", "--speculative-model",
                 "--vllm-use-v1",
                 "--vllm-use-flashinfer-sampler", "--vllm-rocm-use-aiter", "--nccl-nvls-enable",
                 "--vllm-allreduce-use-symm-mem", "--nvidia-driver",
                 "--pytorch-cuda-alloc-conf",
                 "--enable-lora", "--max-loras", "--max-lora-rank", "--lora-extra-vocab-size",
                 "--lora-dtype", "--fully-sharded-loras", "--enable-lora-bias",
                 "--specialize-active-lora", "--compile-cache",
                 "--attention-backend", "--scratch", "--mem-fraction-static",
                 "--enable-dp-attention", "--chunked-prefill-size", "--cuda-graph-max-bs",
                 "--max-total-tokens",
                 "--compare", "--format/-f", "--from-file", "--plot",
                 "--markdown"],
    "explain": None,  # the deployment flags plus --format/-f, --markdown
    "plan": ["--model/-m", "--requests", "--context", "--gpu", "--gpu-memory", "--gpu-arch",
             "--engine",
             "--engine-version", "--entrypoint", "--headroom", "--max-gpus", "--kv-cache-dtype",
             "--top", "--format/-f", "--markdown"],
    "sweep": None,  # the deployment flags plus --set, --output/-o, --format/-f
    "devices": ["--format/-f", "--markdown"],
    "trace": None,  # the estimate's flags plus its own (below)
    "versions": None,  # the estimate's flags plus --from/--to (below)
    "gate": ["--scenarios", "--baseline", "--tolerance", "--update", "--markdown", "--floor"],
    "alloc replay": ["--conf", "--total", "--format/-f", "--markdown"],
    "validate": ["--kernel", "--model/-m", "-tp/--tensor-parallel-size", "--max-num-seqs",
                 "--attention-backend", "--gpu", "--context", "--layers", "--steps", "--device",
                 "--seed", "--dp", "--kv-cache-memory-bytes", "--graph-steps", "--format/-f",
                 "--markdown"],
    "models": ["--format/-f", "--markdown"],
    "gpus": ["--format/-f", "--markdown"],
}


def test_every_commands_options_are_frozen() -> None:
    """A flag dropped or renamed by accident fails here; change OPTIONS with the CLI on purpose."""
    got = {}
    for c in COMMANDS:
        subs = getattr(c.module_object(), "SUBCOMMANDS", None)
        for sub in subs or [None]:
            key = c.name if sub is None else f"{c.name} {sub}"
            got[key] = ["/".join(o.names) for o in parser_of(c, sub).options if o.names]
    flags = OPTIONS["estimate"][:-5]  # the deployment flags every such command shares
    trace = [*flags, "--device", "--rank", "--decode-steps", "--graphs", "--alloc-conf",
             "--snapshot", "--format/-f", "--markdown"]
    assert got == {**OPTIONS, "trace": trace, "explain": [*flags, "--format/-f", "--markdown"],
                   "sweep": [*flags, "--set", "--output/-o", "--format/-f", "--markdown",
                             "--plot"],
                   "versions": [*flags, "--from", "--to", "--format/-f", "--markdown"]}
