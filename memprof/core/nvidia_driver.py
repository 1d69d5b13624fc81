"""The NVIDIA driver a deployment runs under (``--nvidia-driver``), read where it changes what
memprof says about CUDA-graph memory.

The driver memory of CUDA-graph executables is the one figure memprof knows to depend on the
driver (``memprof.core.terms.cudagraph.DRIVER_STACK``). Its per-node costs were measured under
driver R580 (CUDA 13); NVIDIA's published figure for the CUDA 12.x drivers is "around 10KB per
kernel node" (NVIDIA/cccl#3768). A log rarely prints its driver, so where none is given memprof
takes the driver of the era of the release's wheel [assumption, stated in the output]: a CUDA 12.x
wheel (vLLM before 0.20.0) an older driver than R580, a CUDA 13 wheel R580 or later. Given the
driver (nvidia-smi's "Driver Version"):

- R580 or later: R580's measured node costs, at every release (on an architecture before Hopper
  the published ~10 KiB stays: ``cudagraph.NODE_COSTS_MEASURED_ARCH``);
- before R580: the published ~10 KiB a kernel node, at every release and engine, stated instead of
  assumed; except where vLLM's wheel is built for CUDA 13 (0.20.0 on: ``vllm/_C.abi3.so`` needs
  ``libcudart.so.13``), which no driver before R580 loads but under CUDA's forward compatibility
  (NVIDIA's cuda-compat package, a user-mode driver of R580 or later beside an older kernel
  driver, data-center cards only): there R580's costs are kept [assumption, said];
- before R550: on the one published host that ran one deployment under two drivers, CUDA graphs
  took 3.3x the memory under the CUDA 12.2 / 12.3 drivers (R535 / R545) that they took under
  12.4's R550 (vLLM issue #5517: 3.79 and 3.81 GiB against 1.14 on A10G / L4, the toolkit kept at
  12.1), and single-GPU logs under a stated R535 driver hold 3.6-5.5x memprof's executables
  (tests/data/published.json rows 2500-2502 and 2507, docs/accuracy.md "Drivers before R550").
  That host's graphs held collectives and no controlled single-GPU measurement gives the cost, so
  memprof does not raise the figure: the output warns that its CUDA-graph memory, and the KV
  cache of a release whose budget holds the graphs, are likely off in that direction.
"""

from __future__ import annotations

import re

from memprof.base.errors import BadInput

# The first driver branch of CUDA 13 (CUDA 13.0's minimum driver, R580), where the node costs
# were measured (reports/gpu/trace/graph-costs-h200.json, driver 580.x).
R580 = 580
# The driver branch of CUDA 12.4, under which vLLM #5517's host took 3.3x less graph memory
# than under CUDA 12.2 / 12.3's (R535 / R545).
R550 = 550

_VERSION = re.compile(r"[Rr]?(\d{3})(?:\.\d{1,3}){0,2}")

HINT = "the version nvidia-smi prints as 'Driver Version', e.g. 580.82.07, 535.247.01 or 570"


def driver_major(text: str) -> int:
    """The driver branch of a version as nvidia-smi prints it (``535.247.01`` -> 535); BadInput
    for anything else."""
    m = _VERSION.fullmatch(text.strip())
    if m is None or not 300 <= int(m.group(1)) <= 999:
        raise BadInput(f"--nvidia-driver {text[:40]!r} is no NVIDIA driver version", hint=HINT)
    return int(m.group(1))


def check_driver(text: str | None, *, rocm: bool, gpu_name: str) -> None:
    """Refuse a malformed version, and a driver given for a ROCm GPU."""
    if text is None:
        return
    driver_major(text)
    if rocm:
        raise BadInput(f"--nvidia-driver {text} names an NVIDIA driver; {gpu_name} is a ROCm GPU",
                       hint="leave --nvidia-driver out for an AMD GPU")


def before_r550_note(text: str | None, *, graphs: bool) -> str:
    """The warning the output gives for a driver before R550 where CUDA graphs are captured;
    "" otherwise."""
    if text is None or not graphs or driver_major(text) >= R550:
        return ""
    return (f"--nvidia-driver {text}: drivers before R550 held about 3x the CUDA-graph memory of "
            "R550 and later on the one published host that ran both (vLLM #5517: 3.79 against "
            "1.14 GiB), and single-GPU logs under R535 hold 3.6-5.5x memprof's graph "
            "executables; no controlled measurement gives the cost, so memprof's CUDA-graph "
            "figure is that of R550 and later: likely below what this driver takes (and the "
            "KV cache, where the engine's budget holds the graphs, above)")
