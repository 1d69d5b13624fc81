"""Fuzzing every command of the CLI from its real flags (the option rows its parser is built from).

For each of the 12 commands, hypothesis draws argument lists from the command's own options and
arguments, with realistic and edge values: empty strings, ``None``, huge and 400-digit numbers,
negative numbers, unicode, paths that are missing, folders, FIFOs or ``/dev/zero``, outputs in
a folder that does not exist (``nodir/x.csv``). Each argv runs through ``memprof.cli.run`` in a
worker process (a memory cap, and an alarm per example, so an endless read or a hang fails the
example instead of the machine or the suite) in a fresh empty working folder, and must keep the
CLI's contract:

- the exit code is 0, 1, 2 or 3, never 70 (a bug of memprof's own) and never a hang;
- no traceback; an exit 2 or 3 ends with exactly one ``error:`` line and one ``hint:`` line;
- a failed run (exit 2 or 3) creates no file or folder, and changes none of the input files.

The default run is derandomized (CI is reproducible) and small (``DEFAULT_EXAMPLES``: 25 runs
a command, fewer for gate, plan and sweep; well under 20 s in all); torch is blocked in the
default worker, so ``trace`` and ``validate`` are fuzzed up to the point where they need torch
(exit 3, as on an install without the ``[trace]`` extra).

- ``MEMPROF_FUZZ_COMMANDS=N`` runs N examples per command instead, with random seeds when
  ``MEMPROF_FUZZ_RANDOM=1``;
- ``MEMPROF_FUZZ_TORCH=1`` lets torch in (slow: traces and CPU kernels run);
  ``MEMPROF_FUZZ_TIMEOUT`` sets the seconds after which a run counts as hung (10; 300 with
  torch, as validate at its CPU defaults takes minutes);
- ``MEMPROF_FUZZ_LOG=FILE`` appends every broken contract to FILE (JSON lines) instead of
  failing, to survey a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.commands.options import Option, deployment_options

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXAMPLES = {"gate": 10, "plan": 20, "sweep": 20}  # the others: 25 (gate runs ~0.5 s)
SCALE = os.environ.get("MEMPROF_FUZZ_COMMANDS")
TORCH = os.environ.get("MEMPROF_FUZZ_TORCH") == "1"
LOG = os.environ.get("MEMPROF_FUZZ_LOG")
# a run longer than this is a hang (validate at its defaults on the CPU takes minutes)
TIMEOUT_S = int(os.environ.get("MEMPROF_FUZZ_TIMEOUT", "300" if TORCH else "10"))
MEMORY_CAP = (16 if TORCH else 3) << 30  # address space of the worker
NAMES = ["estimate", "explain", "plan", "sweep", "trace", "alloc", "validate", "gate",
         "versions", "models", "gpus", "devices"]


def examples(name: str) -> int:
    return int(SCALE) if SCALE else DEFAULT_EXAMPLES.get(name, 25)


# ---------------------------------------------------------------- the worker process

def _worker() -> None:  # pragma: no cover - runs in the worker process
    """Read one request per line ({"argv", "cwd", "timeout"}), run it, answer one line."""
    import io
    import resource

    cap = int(os.environ["MEMPROF_FUZZ_CAP"])
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if os.environ.get("MEMPROF_FUZZ_TORCH") != "1":
        sys.modules["torch"] = None  # type: ignore[assignment]  # import torch: ImportError
    answer = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray writes to fd 1 (child processes) cannot break the protocol
    from memprof.cli import run

    class Hang(BaseException):
        pass

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang

    signal.signal(signal.SIGALRM, on_alarm)
    for line in sys.stdin:
        req = json.loads(line)
        os.chdir(req["cwd"])
        out, err = io.StringIO(), io.StringIO()
        code: int | str
        try:
            signal.alarm(req["timeout"])
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = run(req["argv"])
        except Hang:
            code = "hang"
        except BaseException as exc:  # run() must return, whatever happens
            code = f"raised {type(exc).__name__}: {exc}"
        finally:
            signal.alarm(0)
        answer.write(json.dumps({"code": code, "out": out.getvalue()[-4000:],
                                 "err": err.getvalue()[-4000:]}) + "\n")
        answer.flush()


class Worker:
    """The worker process, restarted when it dies or stops answering."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""

    def start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT), MEMPROF_FUZZ_CAP=str(MEMORY_CAP))
        self.buf = b""
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self.proc

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def ask(self, argv: list[str], cwd: Path) -> dict[str, Any]:
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self.start()
        assert proc.stdin is not None and proc.stdout is not None
        req = {"argv": argv, "cwd": str(cwd), "timeout": TIMEOUT_S}
        proc.stdin.write((json.dumps(req) + "\n").encode())
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([fd], [], [], TIMEOUT_S + 30)
            chunk = os.read(fd, 1 << 16) if ready else b""
            if not chunk:  # died (e.g. killed for memory) or stuck beyond the alarm
                self.stop()
                return {"code": "hang or crash (worker killed)", "out": "", "err": ""}
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply


# ---------------------------------------------------------------- inputs and values

def _make_inputs(d: Path) -> dict[str, str]:
    """Files the fuzzer points flags at, by role."""
    (d / "folder").mkdir()
    os.mkfifo(d / "fifo")
    shutil.copy(ROOT / "tests/data/alloc_ops_example.json", d / "ops.json")
    shutil.copy(ROOT / "tests/data/logs/vllm-v1-qwen3-235b-fp8-tp4-h100.log", d / "vllm.log")
    shutil.copy(ROOT / "tests/data/serve/serve.sh", d / "serve.sh")
    shutil.copy(ROOT / "reports/baseline.json", d / "baseline.json")
    (d / "scenarios").mkdir()
    shutil.copy(ROOT / "configs/scenarios/llama-3.1-8b-h100.toml", d / "scenarios")
    shutil.copy(ROOT / "configs/models/qwen3-0.6b.json", d / "config.json")
    (d / "empty").write_bytes(b"")
    (d / "binary").write_bytes(bytes(range(256)) * 4)
    digits = "9" * 400
    (d / "huge.log").write_text(f"GPU KV cache size: {digits} tokens\n"
                                f"Available KV cache memory: {digits} GiB\n"
                                f"Model loading took {digits} GiB and 1.0 seconds\n")
    (d / "tp-none.sh").write_text("vllm serve Qwen/Qwen3-32B --tensor-parallel-size None\n")
    (d / "bad.json").write_text('{"ops": [["a", 1, -5], ["x"]], "a": {"b": {"c": [[[]]]}}}')
    return {p.name: str(p) for p in d.iterdir()}


BIG = "9" * 400
INTS = ["0", "1", "2", "8", "-1", "-8", "None", "", BIG, "-" + BIG, "1e3", "1_000", "0x10",
        "2147483648", "18446744073709551617", "٣", " 4"]
FLOATS = ["0", "0.5", "0.9", "1", "1.5", "-1", "nan", "inf", "-inf", "1e400", "None", "", BIG]
TEXTS = ["", "None", "none", " ", "-1", "0", BIG, "é中文", "\u202eevil", "x" * 300, "a=b",
         "=", ",", "--", "-h"]
SIZES = ["80GiB", "1GiB", "512MiB", "16g", "16G", "8k", "32k", "0", "-1GiB", BIG + "GiB",
         "1e9", "nan GiB", "GiB", "None", ""]
MODELS = ["qwen3-0.6b", "qwen3-32b", "llama-3.1-8b", "deepseek-r1", "gpt-oss-120b",
          "deepseek-v4-flash", "Qwen/Qwen3-32B", "nope/none", "no-such-model"]
GPUS = ["H200", "H100", "B200", "MI300X", "A100-40GB", "auto", "bogus"]
OUTPUTS = ["nodir/x.csv", "out.csv", "out.json", "out.md", "out.png", "out.pkl", ".", "",
           "nodir/"]

# realistic values of an option or argument, by its name (the row's dest)
REALISTIC: dict[str, list[str]] = {
    "model": MODELS, "gpu": GPUS, "gpu_memory": SIZES, "kv_cache_memory_bytes": SIZES,
    "headroom": SIZES, "floor": SIZES, "total": SIZES, "context": ["8k", "32768", "1", *SIZES],
    "fmt": ["table", "json", "markdown", "csv", "parquet", "jsonl", "bogus"],
    "compare": ["scratch=shared", "kv_cache_dtype=fp8,max_num_seqs=256",
                "max_model_len=32768", "max_num_seqs=1024", "None", "tp=None", "tp=2",
                "bogus=1", "=", "tp=" + BIG, "max_model_len=None"],
    "sets": ["tp=1,2", "tp=1,2,4,8", "tp=None", "max_model_len=8k,32k", "pp=None", "bogus=1",
            "tp=", "=", "tp=" + BIG, "kv_cache_dtype=auto,fp8", "scratch=shared,per-layer"],
    "engine": ["vllm", "sglang", "trt"], "engine_version": ["0.11.0", "0.7.1", "9.9.9", "x"],
    "entrypoint": ["serve", "llm", "x"], "dtype": ["auto", "bfloat16", "float32", "int3"],
    "quantization": ["fp8", "mxfp4", "awq", "none", "bogus"],
    "kv_cache_dtype": ["auto", "fp8", "fp8_ds_mla", "turboquant_k8v4", "int3"],
    "attention_backend": ["flashmla", "cutlass_mla", "flash_attn", "triton_attn", "bogus"],
    "scratch": ["per-layer", "shared", "both"],
    "kernel": ["mla", "turboquant", "dsv4", "dp_gather", "all", "bogus"],
    "device": ["cuda", "cpu", "fake", "bogus"],
    "conf": ["expandable_segments:True", "max_split_size_mb:-1", "bogus", "a:b:c"],
    "alloc_conf": ["expandable_segments:True", "max_split_size_mb:" + BIG, "bogus"],
    "from_version": ["0.7.1", "0.11.0", "0.33.0", "None", ""],
    "to_version": ["0.7.1", "0.33.0", "9.9", ""],
}
# parameters that name a file memprof reads, and the roles of the inputs that suit them
READS = {"log": ["vllm.log", "huge.log"], "ops": ["ops.json", "bad.json"],
         "from_file": ["serve.sh", "tp-none.sh"], "baseline": ["baseline.json"],
         "scenarios": ["scenarios"], "model": ["config.json"]}
WRITES = {"plot", "output", "snapshot", "markdown"}
BAD_PATHS = ["folder", "fifo", "empty", "binary", "/dev/zero", "/nonexistent/x.json",
             "nodir/x.csv", ""]
SERVE = [["vllm", "serve", "Qwen/Qwen3-32B", "-tp", "2"],
         ["vllm", "serve", "Qwen/Qwen3-32B", "-tp", "None"],
         ["vllm", "serve", "qwen3-32b", "--max-model-len", BIG],
         ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--tp",
          "None"],
         ["vllm", "serve"], ["bogus", "command"], ["vllm", "serve", "x", "--unknown-flag"]]


def _path(inputs: dict[str, str], role: str) -> str:
    return inputs.get(role, role)


def _values(param: Option, inputs: dict[str, str]) -> st.SearchStrategy[str]:
    name = param.dest
    generic = INTS if param.kind == "int" else FLOATS if param.kind == "float" else TEXTS
    pools: list[st.SearchStrategy[str]] = [st.sampled_from(generic)]
    if name in REALISTIC:  # drawn three times as often as the generic edge values
        pools += [st.sampled_from(REALISTIC[name])] * 3
    if name in READS:
        roles = READS.get(name, []) + BAD_PATHS
        pools.append(st.sampled_from(roles).map(lambda r: _path(inputs, r)))
    if name in WRITES:
        pools.append(st.sampled_from([*OUTPUTS, "folder", "fifo", "/dev/zero"]).map(
            lambda r: _path(inputs, r)))
    # any character but NUL (argv cannot hold one) and the two that end a terminal's line
    pools.append(st.text(st.characters(blacklist_characters="\x00\n\r"), max_size=6))
    return st.one_of(*pools)


def _command(name: str) -> list[Option]:
    from memprof.cli import parser_of
    from memprof.commands import find

    entry = find(name)
    assert entry is not None
    return list(parser_of(entry, "replay" if name == "alloc" else None).options)


@st.composite
def argvs(draw: st.DrawFn, name: str, inputs: dict[str, str]) -> list[str]:
    """An argv for command ``name`` from its real parameters."""
    rows = _command(name)
    prefix = ["alloc", "replay"] if name == "alloc" else [name]
    options = [p for p in rows if not p.positional]
    arguments = [p for p in rows if p.positional]
    required = [p for p in options if p.required]
    shared = {o.dest for o in deployment_options()}
    # the command's own options four times as often as the deployment flags it shares
    weighted = [p for p in options for _ in range(1 if p.dest in shared else 4)]
    chosen = draw(st.lists(st.sampled_from(weighted), max_size=5, unique_by=lambda p: p.dest)
                  ) if options else []
    if draw(st.integers(0, 5)):  # mostly give the required options
        chosen += [p for p in required if p not in chosen]
    argv = list(prefix)
    for p in draw(st.permutations(chosen)):
        flag = draw(st.sampled_from(p.names))
        if p.kind == "bool":
            argv.append(flag)
            continue
        for _ in range(draw(st.integers(1, 2)) if p.repeat else 1):
            argv += [flag, draw(_values(p, inputs))]
    tail: list[str] = []
    for p in arguments:
        if p.rest:  # estimate's pasted serve command, after --
            serve = draw(st.one_of(st.just([]), st.sampled_from(SERVE)))
            tail += ["--", *serve] if serve else []
        elif draw(st.integers(0, 7)):
            tail.append(draw(_values(p, inputs)))
    return argv + tail


# ---------------------------------------------------------------- the contract

def _tree(d: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``d`` with its size and mtime (FIFOs and folders included)."""
    out = {}
    for p in sorted(d.rglob("*")):
        s = p.lstat()
        out[str(p.relative_to(d))] = (s.st_size if stat.S_ISREG(s.st_mode) else -1,
                                      s.st_mtime_ns)
    return out


def broken(code: Any, out: str, err: str, created: list[str], changed: list[str]) -> str | None:
    """What the run broke of the CLI's contract, or None."""
    if code not in (0, 1, 2, 3):
        return f"exit {code}"
    if "Traceback" in out + err:
        return "a traceback"
    if code in (2, 3):
        lines = err.strip("\n").split("\n")  # lines as a terminal shows them (not \x1e, \u2028)
        errors = [x for x in lines if x.startswith("error:")]
        hints = [x for x in lines if x.startswith("hint:")]
        if len(errors) != 1 or len(hints) != 1 or lines[-2:] != [errors[0], hints[0]]:
            return "an exit 2/3 without exactly one error: line followed by one hint: line"
        if created:
            return f"a failed run created {created}"
        if changed:
            return f"a failed run changed {changed}"
    return None


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    w = Worker()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _make_inputs(tmp_path_factory.mktemp("fuzz-inputs"))


def _settings(name: str) -> settings:
    return settings(max_examples=examples(name), deadline=None, database=None,
                    derandomize=os.environ.get("MEMPROF_FUZZ_RANDOM") != "1",
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_command(name: str, worker: Worker, inputs: dict[str, str],
                      tmp_path: Path) -> None:
    inputs_dir = Path(inputs["folder"]).parent
    runs = iter(range(10**9))

    @_settings(name)
    @given(argvs(name, inputs))
    def check(argv: list[str]) -> None:
        cwd = tmp_path / f"run-{next(runs)}"
        cwd.mkdir()
        before = _tree(inputs_dir)
        reply = worker.ask(argv, cwd)
        created = sorted(str(p.relative_to(cwd)) for p in cwd.rglob("*"))
        after = _tree(inputs_dir)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        shutil.rmtree(cwd)
        problem = broken(reply["code"], reply["out"], reply["err"], created, changed)
        if problem and LOG:
            with open(LOG, "a", encoding="utf-8") as f:
                f.write(json.dumps({"argv": argv, "problem": problem,
                                    "err": reply["err"][-600:]}) + "\n")
            return
        assert problem is None, f"memprof {' '.join(argv)}: {problem}\n{reply['err'][-1500:]}"

    check()


# ---------------------------------------------------------------- the checker checks itself

def test_contract_check_catches_what_it_should() -> None:
    ok = "error: bad\nhint: fix it\n"
    assert broken(2, "", ok, [], []) is None
    assert broken(2, "", "error: no file a\x1eb\u2028c\nhint: fix it\n", [], []) is None
    assert broken(0, "{}", "", ["out.csv"], []) is None  # a successful run may write
    assert broken(70, "", "internal error: x\nhint: y\n", [], []) == "exit 70"
    assert broken("hang", "", "", [], []) == "exit hang"
    assert broken(2, "", "error: a\n", [], []) is not None
    assert broken(2, "", "error: a\nerror: b\nhint: c\n", [], []) is not None
    assert broken(2, "", "hint: c\nerror: a\n", [], []) is not None
    assert broken(1, "Traceback (most recent call last):", "", [], []) == "a traceback"
    assert broken(2, "", ok, ["nodir"], []) is not None
    assert broken(3, "", ok, [], ["baseline.json"]) is not None


def test_worker_survives_a_hang_and_reports_it(tmp_path: Path) -> None:
    """A read that blocks forever (a FIFO nobody writes) is reported as a hang by the alarm,
    and the worker answers the next request."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    w = Worker()
    try:
        global TIMEOUT_S
        saved, TIMEOUT_S = TIMEOUT_S, 1
        try:
            reply = w.ask(["estimate", "--from-file", str(fifo)], tmp_path)
        finally:
            TIMEOUT_S = saved
        if reply["code"] != "hang":  # fixed: a FIFO is refused at once
            assert reply["code"] == 2
        assert w.ask(["gpus"], tmp_path)["code"] == 0
    finally:
        w.stop()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
