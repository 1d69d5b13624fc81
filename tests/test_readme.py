"""Every ``memprof`` command in the shell examples of the README and of ``docs/`` runs as written
(issue 7), and each command's page shows that command."""

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
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# the examples that build torch tensors (the tracer, the kernels' references): the slow tests
TORCH = ("memprof trace ", "memprof validate ")


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def page_commands(page: Path) -> list[str]:
    """The ``memprof`` command lines of the page's ``bash`` blocks (continuations joined,
    comments and pipes dropped)."""
    text = page.read_text(encoding="utf-8")
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("memprof "):
                commands.append(line.split(" | ")[0])
    return commands


def doc_commands() -> list[object]:
    """Every example once (the first page that shows it), torch's marked slow."""
    seen: dict[str, Path] = {}
    for page in PAGES:
        for command in page_commands(page):
            seen.setdefault(command, page)
    return [pytest.param(c, id=f"{p.relative_to(ROOT)}: {c}",
                         marks=[pytest.mark.slow] if c.startswith(TORCH) else [])
            for c, p in seen.items()]


def test_the_readme_has_a_quick_start() -> None:
    cmds = page_commands(ROOT / "README.md")
    assert len(cmds) >= 8
    for command in ("memprof models", "memprof gpus", "memprof estimate --model", "--format json",
                    "memprof sweep ", "memprof plan ", "-tp 8"):
        assert any(command in c for c in cmds), command


@pytest.mark.parametrize("page", sorted((ROOT / "docs" / "commands").glob("*.md")),
                         ids=lambda p: p.name)
def test_each_command_page_shows_its_command(page: Path) -> None:
    names = {"models.md": ("models", "gpus")}.get(page.name, (page.stem,))
    cmds = page_commands(page)
    for name in names:
        assert any(c.startswith(f"memprof {name}") for c in cmds), (page.name, name)


def test_the_pages_show_what_users_paste() -> None:
    cmds = [c for page in PAGES for c in page_commands(page)]
    for command in ("estimate --gpu H200 -- vllm serve", "sglang.launch_server", "--from-file",
                    "explain tests/data/logs/", "--gpu auto", "gate --update", "--device cuda",
                    "alloc replay", "versions -m"):
        assert any(command in c for c in cmds), command


@pytest.mark.parametrize("command", doc_commands())
def test_doc_example_runs(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a scratch copy of the data the examples read, so `memprof gate --update` rewrites a copy
    # of the gate's baseline (reports/gpu/, 5 MB of measurements no command reads, stays out)
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    (tmp_path / "reports").mkdir()
    shutil.copy(ROOT / "reports" / "baseline.json", tmp_path / "reports")
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


def test_ci_runs_the_readmes_two_set_up_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"## Set up for development.*?```bash\n(.*?)```", readme, flags=re.S)
    assert m, "the README's set-up block is missing"
    setup = m.group(1).strip().splitlines()
    assert len(setup) == 2 and setup[1] == ".venv/bin/python -m pytest"
    # a line ending in a backslash goes on in the next (the guard after the set-up command)
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci = [line.strip() for line in re.sub(r"\\\n\s*", "", text).splitlines()]
    for line in setup:
        assert any(c == line or c.startswith(line + " ||") for c in ci), (
            f"'.ci/run' no longer runs the README's command {line!r}"
        )
