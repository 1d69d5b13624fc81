"""Pictures (issue 14, item 5): the memory bar of each distinct rank at 80 columns, the estimate
table one line per component at 80 columns, ``memprof models`` with whole names, and
``--plot FILE.png|svg`` for ``estimate`` and ``sweep`` (matplotlib optional)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.estimate import Estimate, estimate
from memprof.report.bar import KINDS, MemoryBar, cells, lines, plain, segments

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "qwen3-0.6b-h100": ("qwen3-0.6b", "H100", {}),
    "deepseek-r1-tp8-h200": ("deepseek-r1", "H200", {"tp": 8}),
    "deepseek-v4-flash-tp4": ("deepseek-v4-flash", "H200", {"tp": 4}),
    "qwen3-32b-per-layer": ("qwen3-32b", "H200", {"kv_cache_dtype": "turboquant_k8v4",
                                                  "max_num_seqs": 256, "scratch": "per-layer"}),
    "sglang-dp-attention": ("deepseek-v3", "H200", {"engine": "sglang", "tp": 8, "dp": 8,
                                                    "enable_dp_attention": True}),
    "pp2": ("llama-3.1-70b", "H100", {"tp": 2, "pp": 2}),
    "over-the-gpu": ("deepseek-r1", "H100", {"tp": 8}),  # startup_oom: weights exceed the GPU
}


def est(name: str) -> Estimate:
    model, gpu, kw = CASES[name]
    return estimate(model, Deployment(**kw), gpu_name=gpu)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(list(args))
    return code, out.getvalue(), err.getvalue()


# -- the bar ---------------------------------------------------------------------------------

def test_cells_sum_to_the_width_and_round_each_share_down_or_up() -> None:
    sizes = [7, 0, 13, 1, 79, 300]
    for width in (1, 7, 78, 80, 100):
        n = cells(sizes, width)
        assert sum(n) == width and n[1] == 0
        for k, s in zip(n, sizes, strict=True):
            exact = s * width / sum(sizes)
            assert int(exact) <= k <= int(exact) + 1
    assert cells([0, 0], 80) == [0, 0] and cells([5], 0) == [0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_bar_at_80_columns(name: str) -> None:
    e = est(name)
    total = e.gpu.total_bytes
    for r in e.ranks:
        segs = segments(r, total)
        assert [s.name for s in segs] == [k[1] for k in KINDS]
        # the segments are the rank's components plus what is left of the GPU
        assert sum(s.bytes for s in segs[:7]) == sum(c.bytes for c in r.components)
        if r.headroom_bytes >= 0:
            assert sum(s.bytes for s in segs) == total
            assert segs[-1].bytes == r.headroom_bytes
        text = list(plain(e, r, 80))
        assert all(cell_len(line) <= 80 for line in text), text
        bar = text[1]
        assert cell_len(bar) == 80
        whole = sum(s.bytes for s in segs)
        for s in segs:  # each segment: the floor or the ceiling of its share of 80 cells
            exact = s.bytes * 80 / whole
            assert int(exact) <= bar.count(s.char) <= int(exact) + 1, (s.name, exact)
        legend = " ".join(text[2:])
        for s in segs:
            if s.bytes * 80 / whole >= 1:
                assert f"{s.char} {s.name} " in legend
        # the same through rich at 80 columns, in colour too
        buf = io.StringIO()
        Console(file=buf, width=80, color_system=None).print(MemoryBar(e, r))
        assert buf.getvalue().splitlines() == text


def test_a_rank_over_the_gpu_marks_where_the_gpu_ends() -> None:
    e = est("over-the-gpu")
    r = e.ranks[0]
    assert r.headroom_bytes < 0
    text = list(plain(e, r, 80))
    marker = next(line for line in text if "GPU total" in line)
    used = sum(c.bytes for c in r.components)
    assert abs(marker.index("▲") - e.gpu.total_bytes * 80 / used) <= 1
    assert "over by" in marker and "headroom −" in " ".join(text)


def test_narrow_and_wide_bars_keep_their_width() -> None:
    e = est("qwen3-0.6b-h100")
    for width in (40, 120):
        runs = lines(e, e.ranks[0], width)
        assert all(sum(cell_len(t) for t, _ in line) <= width for line in runs)
        assert sum(cell_len(t) for t, _ in runs[1]) == width


# -- the table at 80 columns -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["deepseek-r1-tp8-h200", "deepseek-v4-flash-tp4",
                                  "sglang-dp-attention", "qwen3-32b-per-layer", "pp2"])
def test_the_estimate_table_is_one_line_per_component_at_80_columns(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model, gpu, kw = CASES[name]
    args = ["estimate", "-m", model, "--gpu", gpu]
    for k, v in kw.items():
        flag = "-pp" if k == "pp" else f"--{k.replace('_', '-')}"
        args += [flag] + ([] if v is True else [str(v)])
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(*args)
    assert code in (0, 1), err
    text = out.splitlines()
    assert all(cell_len(line) <= 80 for line in text), max(text, key=cell_len)
    e = est(name)
    heads = [i for i, line in enumerate(text) if line.startswith("component ")]
    assert len(heads) == len(e.ranks)
    for i, r in zip(heads, e.ranks, strict=True):
        assert set(text[i + 1]) == {"─"}
        body = text[i + 2: i + 2 + len(r.components)]
        # one line per component: each ends with its own size, share and profiled cell
        assert all(line.rstrip().endswith(("yes", "NO", "—")) for line in body), body
        after = text[i + 2 + len(r.components)]
        assert not after.rstrip().endswith(("yes", "NO")), after
    assert "memory of " in out and "verdict:" in out


def test_marks_and_shortened_names_are_explained_in_a_legend(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = cli("estimate", "-m", "deepseek-v4-flash", "--gpu", "H200", "-tp", "4")
    assert "† before the engine's baseline" in out and "‡ outside the budget" in out
    assert "¹ DeepSeek-V4 prefill K gather (workspace)" in out
    assert "RoPE cos/sin cache θ=160000 (compressed layers)" in out  # whole, in the legend


def test_models_shows_whole_names_at_80_columns(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from memprof.core.models import bundled_models

    monkeypatch.setenv("COLUMNS", "80")
    assert run(["models"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert all(cell_len(line) <= 80 for line in out.splitlines())
    rows = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert set(bundled_models()) <= rows
    assert "DeepseekV3" in out and "bf16" in out


# -- --plot ----------------------------------------------------------------------------------

pytest.importorskip("matplotlib")


def test_estimate_plot_writes_a_png_and_an_svg(tmp_path: Path) -> None:
    png, svg = tmp_path / "e.png", tmp_path / "e.svg"
    code, out, err = cli("estimate", "-m", "llama-3.1-70b", "--gpu", "H100", "-tp", "2",
                         "-pp", "2", "-f", "json", "--plot", str(png))
    assert code == 0 and out.startswith("{") and f"wrote the plot to {png} (png)" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = cli("estimate", "-m", "qwen3-0.6b", "--gpu", "H100", "--plot", str(svg))
    assert code == 0, err
    root = ET.fromstring(svg.read_bytes())
    assert root.tag.endswith("svg")
    assert "weights" in svg.read_text() and "headroom" in svg.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.png", "e.svg"]  # no temp files


def test_sweep_plot(tmp_path: Path) -> None:
    png = tmp_path / "sweep.png"
    code, out, err = cli("sweep", "-m", "qwen3-32b", "--gpu", "H100", "--set", "tp=1,2,4,8",
                         "--set", "max_model_len=8k,32k", "--set", "kv_cache_dtype=auto,fp8",
                         "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "16 deployments" in out
    svg = tmp_path / "one-axis.svg"  # one axis, with points that do not fit
    code, _, err = cli("sweep", "-m", "llama-3.1-70b", "--gpu", "H100", "--set", "tp=1,2,4",
                       "--plot", str(svg))
    assert code == 0, err
    assert ET.fromstring(svg.read_bytes()).tag.endswith("svg")


@pytest.mark.parametrize("command", [["estimate", "-m", "qwen3-0.6b", "--gpu", "H100"],
                                     ["sweep", "-m", "qwen3-0.6b", "--gpu", "H100",
                                      "--set", "tp=1,2"]])
def test_a_bad_plot_suffix_is_bad_input(command: list[str], tmp_path: Path) -> None:
    code, out, err = cli(*command, "--plot", str(tmp_path / "plot.pdf"))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"error: cannot plot to '{tmp_path / 'plot.pdf'}': unknown suffix",
                                "hint: --plot FILE.png or FILE.svg"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["estimate", "-m", "qwen3-0.6b", "--gpu", "H100"],
                                     ["sweep", "-m", "qwen3-0.6b", "--gpu", "H100",
                                      "--set", "tp=1,2"]])
def test_missing_matplotlib_is_one_error_line_and_exit_3(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    code, out, err = cli(*command, "--plot", str(tmp_path / "plot.png"))
    assert code == 3 and out == ""
    assert err.splitlines() == ["error: --plot needs matplotlib, which is not installed",
                                "hint: pip install 'memprof-llm[plot]'"]
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    from memprof.report.plot import estimate_figure, save

    target = tmp_path / "e.png"
    target.write_bytes(b"the previous plot")

    def half(self: Figure, f: io.BufferedWriter, **kw: object) -> None:
        f.write(b"\x89PNG half")
        raise RuntimeError("disk gone")

    monkeypatch.setattr(Figure, "savefig", half)
    with pytest.raises(RuntimeError):
        save(estimate_figure(est("qwen3-0.6b-h100")), str(target))
    assert target.read_bytes() == b"the previous plot"
    assert [p.name for p in tmp_path.iterdir()] == ["e.png"]


def test_estimate_imports_no_matplotlib_pandas_or_torch_without_plot() -> None:
    code = ("import sys, io, contextlib\n"
            "from memprof.cli import run\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    run(['estimate', '-m', 'qwen3-0.6b', '--gpu', 'H100'])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'matplotlib', 'pandas', 'torch', 'numpy'}))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         check=True)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr


def test_the_readme_bar_is_what_the_tool_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"```bash\nCOLUMNS=80 (memprof estimate [^`]*?)```\n\n```text\n(.*?)```",
                  readme, flags=re.S)
    assert m, "the README's bar example is missing"
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = cli(*shlex.split(re.sub(r"\\\n\s*", " ", m.group(1)))[1:])
    assert code == 0, err
    assert m.group(2) in out and m.group(2).startswith("memory of rank 0")
