"""The estimator's speed (pytest-benchmark; run with --benchmark-enable to get figures) and the
hard rule behind it: the CLI's main job never imports torch."""

import subprocess
import sys

from pytest_benchmark.fixture import BenchmarkFixture

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate


def test_estimate_deepseek_r1_tp8(benchmark: BenchmarkFixture) -> None:
    result = benchmark(lambda: estimate("deepseek-r1", Deployment(tp=8), gpu_name="H200"))
    assert result.verdict == "fits" and result.kv_cache_bytes_per_token == 70_272


def test_main_job_does_not_import_torch() -> None:
    code = ("import sys; from memprof.cli import run;"
            "rc = run(['estimate','--model','deepseek-r1','--gpu','H200','-tp','8','-f','json']);"
            "sys.stderr.write(str(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch','pynvml','amdsmi','pandas','yaml','pydantic'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stderr.strip() == "[]"
