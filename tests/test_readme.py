"""Every ``memprof`` command in the README's shell examples runs as written (issue 7)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from memprof.cli import run

ROOT = Path(__file__).resolve().parents[1]


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("memprof "):
                commands.append(line.split(" | ")[0])
    return commands


def test_the_readme_has_examples() -> None:
    cmds = readme_commands()
    assert len(cmds) >= 10 and any("gate" in c for c in cmds)
    for command in ("estimate --gpu H200 -- vllm serve", "sglang.launch_server", "--from-file",
                    "explain tests/data/logs/", "plan ", "sweep ", "devices", "--gpu auto"):
        assert any(command in c for c in cmds), command


@pytest.mark.parametrize("command", readme_commands())
def test_readme_example_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                             ) -> None:
    # a scratch copy of the checkout's data, so `memprof gate --update` rewrites a copy
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shutil.copytree(ROOT / "reports", tmp_path / "reports")
    (tmp_path / "tests" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "alloc_ops_example.json", tmp_path / "tests" / "data")
    for folder in ("logs", "serve"):  # explain's logs, --from-file's scripts and manifests
        shutil.copytree(ROOT / "tests" / "data" / folder, tmp_path / "tests" / "data" / folder)
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(shlex.split(command)[1:])
    if "--device cuda" in command and not _has_gpu():
        assert code == 3, (command, err.getvalue())  # needs a GPU: "no CUDA GPU" here
        return
    if ("--gpu auto" in command or command.startswith("memprof devices")) and code == 3:
        # this host's GPUs: none where the tests run without one (one error line, exit 3)
        assert err.getvalue().startswith("error: no GPU found"), err.getvalue()
        return
    assert code in (0, 1), (command, err.getvalue())  # 1: the example predicts an OOM
    assert "error:" not in err.getvalue() and out.getvalue()
