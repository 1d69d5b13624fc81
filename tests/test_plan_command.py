"""``memprof plan``'s serve command is one a user can paste: the HF repo id of a bundled model
(never memprof's own name), an HF id or a folder as given (shell-quoted), and the folder of a
config.json."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from memprof.batch.plan import serve_model
from memprof.cli import run
from memprof.core.models.load import bundled_models

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["--gpu", "H100", "--requests", "64", "--context", "32K", "--top", "1"]


def plan(*model: str, fmt: str = "table") -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = run(["plan", "--model", *model, *ARGS, "-f", fmt])
    return code, out.getvalue()


@pytest.mark.parametrize("name", sorted(bundled_models()))
def test_every_bundled_name_serves_as_its_first_hf_id(name: str) -> None:
    ids = json.loads(bundled_models()[name].read_text())["_hf_ids"]
    served, note = serve_model(name)
    assert served == ids[0] and "/" in served and served != name
    assert note is not None and name in note
    assert serve_model(name.upper())[0] == ids[0]  # bundled names are case-insensitive


def test_hf_id_and_folder_stay_as_given(tmp_path: Path) -> None:
    assert serve_model("Qwen/Qwen3-32B") == ("Qwen/Qwen3-32B", None)
    assert serve_model(str(tmp_path)) == (str(tmp_path), None)
    cfg = tmp_path / "config.json"
    cfg.write_text("{}")
    served, note = serve_model(str(cfg))
    assert served == str(tmp_path) and note is not None and "config.json" in note


def test_best_line_is_pasteable(tmp_path: Path) -> None:
    code, out = plan("qwen3-32b")
    assert code == 0
    best = next(x for x in out.splitlines() if x.startswith("best: "))
    assert best.startswith("best: vllm serve Qwen/Qwen3-32B -tp 8 ")
    assert "qwen3-32b" not in best
    assert "the HF repo id of memprof's bundled qwen3-32b" in out
    code, out = plan("qwen3-32b", fmt="json")
    assert json.loads(out)["plans"][0]["command"].startswith("vllm serve Qwen/Qwen3-32B ")
    folder = tmp_path / "my model"
    folder.mkdir()
    shutil.copy(bundled_models()["qwen3-32b"], folder / "config.json")
    code, out = plan(str(folder), fmt="json")
    assert json.loads(out)["plans"][0]["command"].startswith(f"vllm serve '{folder}' -tp 8 ")
