"""CUDA-graph memory: vLLM's estimate, which it subtracts from the KV budget, and memprof's
prediction of the pool actually used above it.

vLLM@52a31cc: capture sizes ``VllmConfig._set_cudagraph_sizes`` (vllm/config/vllm.py), modes
(vllm/config/compilation.py, vllm/v1/cudagraph_dispatcher.py), the estimate
``GPUModelRunner.profile_cudagraph_memory`` and the capture ``capture_model``
(vllm/v1/worker/gpu_model_runner.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memprof.base.units import KiB, MiB, cdiv, fmt_bytes
from memprof.core.attention import kind_of
from memprof.core.attention_backends import ROWS as BACKEND_ROWS
from memprof.core.attention_backends import chosen
from memprof.core.components import Component, TermContext
from memprof.core.deployment import Deployment
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_pooling import convert_of, graph_mode
from memprof.core.gpus import GPU, arch_cc
from memprof.core.kv_dtypes import SPARSE_MLA, attention_kind
from memprof.core.kvcache import rank_layer_kinds
from memprof.core.models import MLP, Layer
from memprof.core.models.families import family_of_architecture, family_row
from memprof.core.nodes import spans_nodes
from memprof.core.nvidia_driver import R580, driver_major
from memprof.core.terms.activation import activation_stages, cublas_workspace_bytes
from memprof.core.terms.attn_capture import estimate_window_workspace
from memprof.core.terms.bnb_linear import bnb_graph_nodes
from memprof.core.terms.common import (
    is_last_stage,
    max_seqs,
    model_bytes,
    profile_tokens,
)
from memprof.core.terms.custom_allreduce import custom_all_reduce_applies
from memprof.core.terms.drafter_graphs import drafter_captures, drafter_graph_note
from memprof.core.terms.lora import lora_capture_cases, lora_graph_nodes
from memprof.core.terms.nccl import nccl_version
from memprof.core.terms.runner_v2_profile import (
    runs_v2,
    v2_estimates_graphs,
    v2_estimates_nothing,
)
from memprof.core.terms.stream_pool import pool_before_graphs
from memprof.core.versions import Rule, rule_in_force, value_at
from memprof.core.weights.formats import fp8_on_marlin
from memprof.core.weights.mlp import moe_caches_per_call

# CUDA graphs: driver memory for the graph executables, measured by this project on one H200
# (driver 580, CUDA 13, torch 2.11.0+cu130; reports/gpu/trace/graph-costs-h200.json from
# ``recorders/gpu_graph_costs.py``: 16 cases of 1-1,000 graphs of 1-64 kernels, least squares,
# residuals ≤ 1.6 MiB): the first graph a process instantiates costs ~70 MiB, each further graph
# ~0.107 MiB, each kernel node in it ~2.26 KiB (elementwise) or ~3.27 KiB (a cuBLAS GEMM).
# The old model (2 MiB per capture size) was 1.9-3.2× under what `memprof trace` measured.
GRAPH_DRIVER_FIRST = 70 * MiB
GRAPH_DRIVER_PER_GRAPH = 110 * KiB
GRAPH_DRIVER_PER_GEMM_NODE = 3350
GRAPH_DRIVER_PER_KERNEL_NODE = 2310
# An NCCL collective node (the all-reduce NCCL captures): 8,655 B of driver memory a node,
# reports/gpu/nccl/graph-collectives-4x-h100.json kind "pynccl" (ncclAllReduce on the capture
# stream, as vLLM's PyNccl captures it), (driver_bytes of "<shape>, 64 nodes" − of "<shape>,
# 1 nodes") / 63 / 250 graphs, the same for all three shapes; at 2 ranks 8,588–8,721 B
# (graph-collectives-2x-h100-g1000.json, 1,000 graphs), the same for c10d and cuMem off
# (graph-collectives-2x-h100.json). An elementwise node measured 2,130–2,530 B alongside.
# The same over host shared memory (NCCL_P2P_DISABLE=1, GPUs without peer access), back to back
# and after a kernel, to the byte or within 0.5%: graph-collectives-2x-h100-shm.json; and again
# with each case in its own processes, P2P and SHM equal to the byte, 8,613 B back to back, and
# over NET the same per node (reports/gpu/graph-transport/graph-collectives-transport-2x-h100.json).
GRAPH_DRIVER_PER_NCCL_NODE = 8655
# NCCL's graph mixing support (``NCCL_GRAPH_MIXING_SUPPORT``, default 1; vLLM leaves it, its
# vllm/env_override.py sets NCCL_CUMEM_ENABLE only): under capture NCCL serialises every launch
# with its non-captured work through its own strong stream, which it brings into the graph with
# an event record per launch
# (src/misc/strongstream.cc ``ncclStrongStreamAcquire`` / ``Release``; NVIDIA/nccl#1901: "will
# launch a large number of stream in cudagraph"). An NCCL node captured after other work then
# costs 148,395 B of driver memory on top of its own 8,655 B, measured on the trace's own graphs
# with the setting toggled: reports/gpu/nccl/graph-mixing-2x-h100.json, Qwen3-0.6B TP2 (562
# graphs, 57 NCCL nodes a capture size × 30 sizes) traced 350,224,384 B of driver memory with
# mixing on and 96,468,992 B with NCCL_GRAPH_MIXING_SUPPORT=0: (350,224,384 − 96,468,992) /
# 1,710 = 148,395 B. The recorder's short chains of one kernel and one all-reduce give
# 122,816-123,331 B a node (graph-collectives-scaling-2x-h100.json, k = 1-128, slope against
# the same chain without the collective); NCCL nodes issued back to back cost 8,655 B each (the
# first graph's nodes are not "after other work"). Every all-reduce of a decoder forward
# follows a GEMM or the embedding, so each pays it.
GRAPH_DRIVER_NCCL_MIXING = 148_395
# Where the event-record node of the graph mixing support sits differs by NCCL release
# (src/misc/strongstream.cc ``ncclStrongStreamRelease`` under capture, read at each tag):
# - "in line" (v2.20.5-1, v2.21.5-1: it becomes the strong stream's only tip, ``g->tipNodes``,
#   which the next launch waits on; v2.27.5-1 … v2.28.9-1: ``cudaStreamUpdateCaptureDependencies``
#   makes every later capture on the device stream depend on it);
# - "leaf" (v2.26.2-1 … v2.27.3-1: ``cudaGraphAddEventRecordNode`` after the previous record,
#   ``cap->lastRecord``, and the device stream's nodes, whose capture dependencies are left as
#   they were: the records form a side chain nothing waits on).
# Measured with CUDA's event API in those two shapes, each case in its own process
# (reports/gpu/graph-mixing-topology/graph-mixing-topology-h100-fresh.json, H100, driver 580,
# 200 graphs of k collectives between kernels): equal for k = 1 and 2 (220,201 / 335,544 B a
# graph); from 2 to 8 a leaf graph grows by 20,972 B, what its 12 more kernel nodes cost (the
# wait case: 20,971 B), an in-line one by 713,032 B (115,343 B each record more). So in a
# "leaf" release the records past a graph's second cost nothing measurable, and only two NCCL
# nodes a graph pay ``GRAPH_DRIVER_NCCL_MIXING`` (``nccl_mixing_nodes``). Keyed by the NCCL
# release ``memprof.core.terms.nccl.NCCL_VERSION`` gives an engine release (the torch its wheel
# pins and that torch's NCCL pin), each read in src/misc/strongstream.cc at its tag: v2.20.5-1
# and v2.21.5-1 make the record the tip the next launch waits on (in line); v2.26.2-1 and
# v2.27.3-1 release the stream with a leaf after ``cap->lastRecord``; from v2.27.5-1
# (``ncclStrongStreamRelease``: ``cudaStreamUpdateCaptureDependencies`` to the record) in line
# again, through v2.28.9-1, v2.29.7-1 and v2.30.7-1.
NCCL_RECORD_PLACEMENT: dict[str, str] = {
    "2.20.5": "in line", "2.21.5": "in line", "2.26.2": "leaf", "2.27.3": "leaf",
    "2.27.5": "in line", "2.28.9": "in line", "2.29.7": "in line", "2.30.7": "in line",
}
# NCCL's NET transport (ranks on different hosts; IB or sockets) adds driver memory per graph that
# holds a collective, not per collective: a plan that carries proxy work, as every NET channel's
# does, has NCCL launch a host node (``hostStreamPlanCallback``, which hands the proxy its args)
# on its host strong stream under capture (src/enqueue.cc ``ncclLaunchPrepare``: "We have to
# launch host tasks to push proxy args"), and that stream, acquired in each new graph, brings
# its own event-wait node in at the graph's head, as the device stream does. Measured
# (reports/gpu/graph-transport/graph-collectives-transport-2x-h100.json: 2x H100, driver
# 580.159.04, NCCL 2.28.9, loopback sockets with P2P, SHM and IB off, cuMem off and on; 100
# graphs a case, each case in its own processes): NET − SHM is 10,485,760 B per 100 graphs in
# five of the six cases holding 1, 8 or 64 all-reduces between kernels or back to back (one
# 2 MiB granule more in the sixth), 0 B for graphs without one; the per-all-reduce cost is
# the same (slope 8 → 64: 125,829 against 126,204 B, within the 374 B granularity). P2P and
# SHM are equal to the byte in every case, cuMem on and off.
GRAPH_DRIVER_NET_PER_GRAPH = 104_858
# The driver a release runs under, for the kernel nodes' cost. The constants above are driver
# R580's (CUDA 13.0). A vLLM release's PyPI wheel is built for one CUDA major version, which sets
# the oldest driver it runs on: vllm/_C.abi3.so of the 0.7.3 … 0.19.1 wheels (those read) needs
# libcudart.so.12 (torch 2.5.1 … 2.10.0), that of 0.20.0 libcudart.so.13 (torch 2.11.0), which
# no driver before R580 loads. A CUDA 12.x wheel runs on R525 … R575 as well as on R580, and a
# log rarely prints its driver, so before 0.20.0 memprof takes the driver of the wheel's own era
# [assumption, stated in the output: ``driver_stack_note``] and its kernel nodes at NVIDIA's
# published figure for that era, "CUDA graph consumes around 10KB per kernel node" (NVIDIA/cccl
# pull request #3768, 2025-02-11, the cudax STF executable-graph cache, which caps its cache by
# that footprint), read as 10 KiB a node, GEMM or not [approximation: a rounded figure with no
# driver named; the per-graph and NCCL-node costs stay R580's measurements, for want of a
# published figure]. That a driver release moves graph memory by such factors is on record:
# vLLM issue #5517, CUDA-graph memory on A10G / L4 of 3.79-3.81 under CUDA 12.2 / 12.3 drivers
# and 1.14 under 12.4's, the toolkit kept at 12.1 (an 8-GPU host, and the thread's replies are
# about custom all-reduce and NCCL: graphs holding collectives, not a single-GPU figure); for
# kernel nodes alone, one graph of empty kernels under driver 470.16 / CUDA 11.2 grew by ~64 KiB
# a node (NVIDIA developer forums thread 244901, "Increasing memory footprint with large task
# graphs": 362, 395, 458 MB at 500, 1,000, 2,000 nodes), against ~10 KB (cccl#3768) and R580's
# 2.3-3.3 KB. Single-GPU logs under a stated R535 driver miss by such factors too (published
# rows 2500-2502 and 2507: one A100-SXM4-40GB on 535.247.01, 83-99 KiB a kernel node at R580's
# per-graph cost), but no controlled A/B (one deployment, two drivers) that memprof can rebuild
# gives the cost of the drivers before R550, so none is modelled (docs/accuracy.md, "Drivers
# before R550").
GRAPH_DRIVER_PER_NODE_CUDA12 = 10 * KiB
DRIVER_STACK: tuple[Rule, ...] = (
    Rule(name="cudagraph_driver_stack", changes="CUDA graphs: driver memory a kernel node",
         since=None, until="0.20.0", value="cuda12", introduced_by="before 0.7.1",
         removed_by="PyPI wheel built for CUDA 13 (torch 2.11.0; first released in 0.20.0)",
         source="vllm/_C.abi3.so NEEDED libcudart.so.12 in the 0.7.3, 0.8.4, 0.10.1.1, 0.11.0, "
         "0.14.0, 0.17.1, 0.18.0, 0.19.0 and 0.19.1 wheels (torch 2.5.1 … 2.10.0); kernel node "
         "~10 KB: "
         "NVIDIA/cccl#3768 (https://github.com/NVIDIA/cccl/pull/3768)"),
    Rule(name="cudagraph_driver_stack", changes="CUDA graphs: driver memory a kernel node",
         since="0.20.0", until=None, value="cuda13",
         introduced_by="PyPI wheel built for CUDA 13 (torch 2.11.0; first released in 0.20.0)",
         source="vllm/_C.abi3.so NEEDED libcudart.so.13 in the 0.20.0 wheel (torch 2.11.0): "
         "driver R580 or later, where reports/gpu/trace/graph-costs-h200.json measured the "
         "node costs"),
)


def wheel_stack(dep: Deployment) -> str:
    """The CUDA major version of the release's wheel, read as the driver it is assumed to run
    under: "cuda12" (a vLLM release before 0.20.0) or "cuda13" (R580; every other engine, whose
    releases memprof does not map to a CUDA version)."""
    if not engine_of(dep).graph_estimate_by_release:
        return "cuda13"
    return str(value_at(DRIVER_STACK, dep.engine_version, "cuda13"))


def driver_stack(ctx: TermContext) -> str:
    """"cuda12" (kernel nodes at ``GRAPH_DRIVER_PER_NODE_CUDA12``) or "cuda13" (R580's measured
    costs): the driver ``--nvidia-driver`` gives (R580 or later: "cuda13"; before it "cuda12",
    but where the wheel is built for CUDA 13, which only forward compatibility's user-mode driver
    of R580 or later loads), else the wheel's (``wheel_stack``)."""
    dep = ctx.dep
    if dep.nvidia_driver is None:
        return wheel_stack(dep)
    if driver_major(dep.nvidia_driver) >= R580 or forward_compatible(dep):
        return "cuda13"
    return "cuda12"


def forward_compatible(dep: Deployment) -> bool:
    """Is a driver before R580 given for a vLLM release whose wheel is built for CUDA 13, which
    loads only under CUDA's forward compatibility (a user-mode driver of R580 or later)?"""
    return (dep.nvidia_driver is not None and driver_major(dep.nvidia_driver) < R580
            and engine_of(dep).graph_estimate_by_release and wheel_stack(dep) == "cuda13")


# R580's kernel-node costs (``GRAPH_DRIVER_PER_GEMM_NODE``, ``GRAPH_DRIVER_PER_KERNEL_NODE``) were
# measured on H100 / H200 (sm90) only. On an NVIDIA architecture before Hopper (sm7x, sm8x) memprof
# takes NVIDIA's published figure (``GRAPH_DRIVER_PER_NODE_CUDA12``, NVIDIA/cccl#3768, which names
# no architecture or driver) at every driver instead [assumption, stated in the output:
# ``driver_stack_note``]. The published logs of such cards under R580 agree with it and not with
# the sm90 figure: vLLM 0.24.0 on A100-SXM4-80GB / -40GB (driver 580.82.07, CUDA 13.0, the run
# records of tests/data/published.json rows 1205-1214) and 0.26.0 on an A40 (row 1104) log
# 0.56-0.57 GiB for Llama-3 8B's 1,718 graphs (0.88 with FlashInfer's decode wrappers), where the
# sm90 costs give 0.38 (0.71) and ~10 KiB a node 0.54 (0.88); the A100 logs of CUDA 12.x wheels
# (rows 504, 521, 522, 526, 951) are within 16% at the same figure. The vLLM code of those windows
# holds no sm80 / sm86 term (``memprof.core.graph_log``'s docstring: FlashAttention 2 allocates
# nothing per capture size; the only architecture-dependent buffers, FlashAttention 3's, are
# sm90's, and they add). A newer architecture keeps the sm90 measurement: on RTX PRO 6000s (sm120)
# vLLM 0.27.1 logs 0.32 GiB of CUDA-graph memory a rank (row 904, TP4), below even the sm90 costs'
# 0.78. A ROCm GPU or an unknown architecture keeps it too (HIP graphs are not the published
# figure's subject; an unknown card may be an sm90 one).
NODE_COSTS_MEASURED_ARCH = "sm90"


def node_costs_measured_here(ctx: TermContext) -> bool:
    """Does this rank take R580's measured kernel-node costs (``NODE_COSTS_MEASURED_ARCH``):
    every architecture but an NVIDIA one before Hopper (sm7x, sm8x)?"""
    cc = arch_cc(ctx.gpu.arch)
    measured = arch_cc(NODE_COSTS_MEASURED_ARCH)
    assert measured is not None
    return ctx.gpu.is_rocm or cc is None or cc >= measured


def node_costs(ctx: TermContext) -> tuple[int, int]:
    """Driver bytes of a GEMM node and of another kernel node: NVIDIA's published ~10 KiB a node
    at a release whose wheel is built for CUDA 12.x (``DRIVER_STACK``) or on an NVIDIA
    architecture before Hopper (``NODE_COSTS_MEASURED_ARCH``); R580's measured costs
    otherwise."""
    if driver_stack(ctx) == "cuda12" or not node_costs_measured_here(ctx):
        return GRAPH_DRIVER_PER_NODE_CUDA12, GRAPH_DRIVER_PER_NODE_CUDA12
    return GRAPH_DRIVER_PER_GEMM_NODE, GRAPH_DRIVER_PER_KERNEL_NODE


def driver_stack_note(ctx: TermContext) -> str:
    """What the output says where a published node cost is taken (``DRIVER_STACK``'s CUDA 12.x
    assumption, or an architecture R580's costs were not measured on); "" where neither."""
    given = ctx.dep.nvidia_driver
    if driver_stack(ctx) == "cuda12":
        if given is not None:
            return f"kernel nodes at ~10 KiB (NVIDIA/cccl#3768): driver {given}, before R580"
        return (f"kernel nodes at ~10 KiB (NVIDIA/cccl#3768): vLLM {ctx.dep.engine_version}'s "
                "wheel is built for CUDA 12.x, its driver taken as older than R580 [assumption]; "
                "--nvidia-driver states it")
    if forward_compatible(ctx.dep):
        return (f"driver {given} loads vLLM {ctx.dep.engine_version}'s CUDA 13 wheel only under "
                "CUDA forward compatibility (a user-mode driver of R580 or later): R580's node "
                "costs kept [assumption]")
    if not node_costs_measured_here(ctx):
        return (f"kernel nodes at ~10 KiB (NVIDIA/cccl#3768) on {ctx.gpu.name} ({ctx.gpu.arch}), "
                f"an architecture before the {NODE_COSTS_MEASURED_ARCH} R580's node costs were "
                "measured on [assumption]")
    return ""


def assumed_driver_note(dep: Deployment, gpu: GPU) -> str:
    """The output's note where no ``--nvidia-driver`` is given and the driver the release's
    wheel implies is taken for the CUDA graphs' kernel nodes (``DRIVER_STACK``'s CUDA 12.x
    assumption), on a card where that driver moves the figure (R580's node costs were measured
    on it: ``NODE_COSTS_MEASURED_ARCH``); "" where nothing is assumed (a CUDA 13 wheel needs R580
    or later) or no graph is captured."""
    measured = arch_cc(NODE_COSTS_MEASURED_ARCH)
    cc = arch_cc(gpu.arch)
    if (dep.nvidia_driver is not None or dep.enforce_eager or gpu.is_rocm
            or not engine_of(dep).graph_estimate_by_release or wheel_stack(dep) != "cuda12"
            or (cc is not None and measured is not None and cc < measured)):
        return ""
    return (f"no --nvidia-driver: vLLM {dep.engine_version}'s wheel is built for CUDA 12.x, so "
            "its driver is taken as one before R580 and the CUDA graphs' kernel nodes at "
            "NVIDIA's ~10 KiB each (NVIDIA/cccl#3768) [assumption]; --nvidia-driver 580 or "
            "later takes R580's measured costs")


# vLLM floors its per-graph sample at 1 MiB ("driver overhead", vLLM@52a31cc gpu_model_runner.py
# profile_cudagraph_memory; still so in v0.33.0).
CUDAGRAPH_MIN_PER_GRAPH = 1 * MiB
# min(max_num_seqs·decode_query_len·2, 512), vLLM@52a31cc vllm/config/vllm.py
CUDAGRAPH_MAX_CAPTURE_DEFAULT = 512

# The default list of CUDA-graph capture sizes, per release and engine (``_set_cudagraph_sizes``
# of VllmConfig, vllm/config.py to 0.9.x, vllm/config/__init__.py 0.10.x–0.11.0,
# vllm/config/vllm.py from 0.11.1): ``value`` names the scheme ``capture_sizes`` computes.
#   v0:          [1, 2, 4] + 8·i up to the smallest of them ≥ max_num_seqs (V0 engine)
#   v1_512:      [1, 2, 4] + range(8, 513, 8), those ≤ max_num_batched_tokens (max_num_seqs
#                is not read: 0.8.x captures all 67 sizes at 256 sequences too)
#   v1_2seqs_8:  [1, 2, 4] + range(8, min(2·max_num_seqs, 512) + 1, 8), ≤ max_num_batched_tokens
#   v1_2seqs_16: max = min(2·max_num_seqs, 512, max_num_batched_tokens); step 8 below 256,
#                16 from 256
#   v1_dql:      as v1_2seqs_16 with max_num_seqs × (1 + speculative tokens) (vLLM@52a31cc)
CAPTURE_SIZES: tuple[Rule, ...] = (
    Rule(name="cudagraph_capture_sizes", changes="CUDA graphs: capture sizes", since="0.6.0",
         until="0.11.0", value="v0", introduced_by="V0 engine",
         removed_by="V0 engine removed (0.11.0)", generation="v0",
         source="0.8.5 config.py VllmConfig._set_cudagraph_sizes, 'if not envs.VLLM_USE_V1': "
         "possible_sizes = [1, 2, 4] + [8 * i for i in range(1, 1025)], cut at the first "
         "≥ max_num_seqs; the same in 0.8.0, 0.9.0 and 0.9.2; 0.6.0 – 0.6.4.post1 "
         "worker/model_runner.py _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in "
         "range(1, 1025)] cut at _get_max_graph_batch_size(max_num_seqs), 0.6.5 / 0.6.6.post1 "
         "config.py VllmConfig._set_cudagraph_sizes as 0.8.5"),
    Rule(name="cudagraph_capture_sizes", changes="CUDA graphs: capture sizes", since="0.8.0",
         until="0.10.0", value="v1_512", introduced_by="V1 on by default (0.8.0)",
         removed_by="cuda_graph_sizes default [min(max_num_seqs * 2, 512)] (first released "
         "in 0.10.0)", generation="v1",
         source="0.8.0 / 0.8.5 config.py VllmConfig._set_cudagraph_sizes (V1: [1, 2, 4] + "
         "range(8, 513, 8), size <= max_num_batched_tokens); 0.9.0 / 0.9.2: "
         "SchedulerConfig.cuda_graph_sizes default [512], the same list"),
    Rule(name="cudagraph_capture_sizes", changes="CUDA graphs: capture sizes", since="0.10.0",
         until="0.11.1", value="v1_2seqs_8",
         introduced_by="cuda_graph_sizes default [min(max_num_seqs * 2, 512)] (first released "
         "in 0.10.0)", removed_by="stride 16 from 256 (first released in 0.11.1)",
         generation="v1",
         source="0.10.1 config/scheduler.py SchedulerConfig.__post_init__ (cuda_graph_sizes = "
         "[min(max_num_seqs * 2, 512)]); config/__init__.py _set_cudagraph_sizes ([1, 2, 4] + "
         "range(8, cuda_graph_sizes[0] + 1, 8), <= max_num_batched_tokens); 0.11.0 alike"),
    Rule(name="cudagraph_capture_sizes", changes="CUDA graphs: capture sizes", since="0.11.1",
         until="0.13.0", value="v1_2seqs_16",
         introduced_by="stride 16 from 256 (first released in 0.11.1)",
         removed_by="decode_query_len (speculative tokens) in the cap (first released in "
         "0.13.0)", generation="v1",
         source="0.11.1 / 0.12.0 config/vllm.py _set_cudagraph_sizes: max = min(max_num_seqs "
         "* 2, 512, max_num_batched_tokens); range(8, min(max + 1, 256), 8) + range(256, "
         "max + 1, 16)"),
    Rule(name="cudagraph_capture_sizes", changes="CUDA graphs: capture sizes", since="0.13.0",
         until=None, value="v1_dql", introduced_by="decode_query_len in the cap (first "
         "released in 0.13.0)", generation="v1",
         source="0.13.0 / 0.19.0 config/vllm.py _set_cudagraph_sizes: min(max_num_seqs * "
         "decode_query_len * 2, 512); vLLM@52a31cc"),
)

def model_max_capture(dep: Deployment, architecture: str | None) -> int | None:
    """The largest capture size the model's own config sets (its family's
    ``Family.max_capture`` rows: gpt-oss from vLLM 0.10.1, memprof/core/models/families/
    gpt_oss.py), or ``None`` where the release's default applies."""
    family = family_of_architecture(architecture) if architecture else None
    if family is None or not family.max_capture:
        return None
    own = value_at(family.max_capture, dep.engine_version, None)
    return None if own is None else int(str(own))


# Which graphs a capture size gets: V0's model runner captures the whole forward once per size
# (FULL); V1 captures the compiled forward piecewise, and from 0.11.0 also FULL graphs for
# uniform decode batches (FULL_AND_PIECEWISE).
GRAPH_MODES: tuple[Rule, ...] = (
    Rule(name="cudagraph_modes", changes="CUDA graphs: modes", since="0.6.0", until="0.11.0",
         value="FULL", introduced_by="V0 engine", removed_by="V0 engine removed (0.11.0)",
         generation="v0",
         source="0.8.5 worker/model_runner.py GPUModelRunnerBase.capture_model: one "
         "CUDAGraphRunner (the whole model forward) per batch size; the same in 0.6.0, "
         "0.6.4.post1 and 0.6.6.post1"),
    Rule(name="cudagraph_modes", changes="CUDA graphs: modes", since="0.8.0", until="0.11.0",
         value="PIECEWISE", introduced_by="V1 on by default (0.8.0)",
         removed_by="FULL_AND_PIECEWISE by default (first released in 0.11.0)",
         generation="v1",
         source="0.10.1 / 0.10.2 config/__init__.py VllmConfig.__post_init__: cudagraph_mode "
         "None → PIECEWISE under V1 at CompilationLevel.PIECEWISE (0.8.x–0.9.x: piecewise "
         "capture of the compiled graph only)"),
    Rule(name="cudagraph_modes", changes="CUDA graphs: modes", since="0.11.0", until=None,
         value="FULL_AND_PIECEWISE", introduced_by="FULL_AND_PIECEWISE by default (first "
         "released in 0.11.0)", generation="v1",
         source="0.11.0 config/__init__.py VllmConfig.__post_init__: 'default to full and "
         "piecewise for most models'; vLLM@52a31cc vllm/config/compilation.py"),
)


# The sizes of Model Runner V2's uniform-decode FULL graphs (``CudaGraphManager._init_candidates``
# in v1/worker/gpu/cudagraph_utils.py), with dql = 1 + k draft tokens and R = max_num_seqs:
#   within:   the capture sizes x with dql ≤ x ≤ dql·R, as V1's dispatcher (``graph_modes``)
#   round_up: every capture size rounded up to a multiple of dql ("avoid duplicate graphs"),
#             those ≤ dql·R and ≤ the largest capture size (max_cudagraph_capture_size) kept
# The same list either way without draft tokens (dql = 1).
V2_FULL_DECODE_SIZES: tuple[Rule, ...] = (
    Rule(name="cudagraph_v2_full_decode_sizes",
         changes="CUDA graphs: FULL decode sizes (Model Runner V2)", since="0.21.0",
         until="0.25.0", value="within", applies_to="speculative",
         introduced_by="Model Runner V2's CudaGraphManager (0.21.0)",
         removed_by="uniform-decode sizes rounded up to multiples of decode_query_len (first "
         "released in 0.25.0)",
         source="0.21.0 / 0.22.0 / 0.23.0 / 0.24.0 v1/worker/gpu/cudagraph_utils.py "
         "_init_candidates: a FULL descriptor per capture size with decode_query_len <= "
         "num_tokens <= max_num_reqs * decode_query_len"),
    Rule(name="cudagraph_v2_full_decode_sizes",
         changes="CUDA graphs: FULL decode sizes (Model Runner V2)", since="0.25.0",
         until=None, value="round_up", applies_to="speculative",
         introduced_by="uniform-decode sizes rounded up to multiples of decode_query_len "
         "(first released in 0.25.0)",
         source="0.25.0 / 0.27.0 / 0.28.0 / 0.29.0 / 0.31.0 / 0.32.0 / 0.33.0 "
         "v1/worker/gpu/cudagraph_utils.py _init_candidates: rounded_num_tokens = "
         "round_up(num_tokens, decode_query_len), skipped above max_num_reqs * "
         "decode_query_len or max_cudagraph_capture_size, 'avoid duplicate graphs'; "
         "decode_query_len = num_speculative_tokens + 1 (v1/worker/gpu/model_runner.py, "
         "model_states/interface.py num_new_sampled_tokens_per_step = 1)"),
)


def v2_full_decode_sizes(dep: Deployment, sizes: list[int]) -> list[int]:
    """Model Runner V2's FULL uniform-decode sizes from the capture sizes (rows in
    ``V2_FULL_DECODE_SIZES``), with dql = 1 + num_speculative_tokens, R = max_num_seqs::

        round_up:  sorted({⌈x / dql⌉·dql for x in sizes} ∩ [dql, min(dql·R, max(sizes))])
        within:    [x for x in sizes if dql ≤ x ≤ dql·R]

    Not modelled: dynamic speculative decoding's several query lengths, adaptive verification's
    varlen decode graphs and the micro-batch twins of DBO (none is a default)."""
    dql = 1 + dep.num_speculative_tokens
    most = dql * max_seqs(dep)
    if value_at(V2_FULL_DECODE_SIZES, dep.engine_version, "round_up") == "within":
        return [x for x in sizes if dql <= x <= most]
    top = min(most, max(sizes, default=0))
    return sorted({r for r in (cdiv(x, dql) * dql for x in sizes) if r <= top})


def capture_sizes(dep: Deployment, architecture: str | None = None) -> list[int]:
    """vLLM ``_set_cudagraph_sizes`` at ``dep.engine_version`` (rows in ``CAPTURE_SIZES``); the
    newest (vllm/config/vllm.py @52a31cc, vLLM@52a31cc gpu_model_runner.py
    profile_cudagraph_memory)::

        dql = 1 + num_speculative_tokens
        max_capture = min(min(max_num_seqs·dql·2, 512), max_num_batched_tokens)
        sizes = [1,2,4] (≤ max) + range(8, min(max+1, 256), 8) + range(256, max+1, 16)
                + [max_num_batched_tokens] if it is ≤ max and not present

    where the model's config sets its own largest size (``model_max_capture``, gpt-oss from
    0.10.1), that size replaces min(max_num_seqs·dql·2, 512) in the stride-16 list.
    """
    scheme = value_at(CAPTURE_SIZES, dep.engine_version, "v1_dql")
    mnbt = profile_tokens(dep)
    own = model_max_capture(dep, architecture)
    if own is not None and scheme != "v0":
        mx = min(own, mnbt)
        sizes = [x for x in (1, 2, 4) if x <= mx]
        sizes += list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))
        if scheme == "v1_dql" and mnbt <= mx and mnbt not in sizes:
            sizes.append(mnbt)
        return sorted(sizes)
    if scheme == "v0":
        possible = [1, 2, 4] + [8 * i for i in range(1, 1025)]
        cap = next((x for x in possible if x >= max_seqs(dep)), possible[-1])
        return [x for x in possible if x <= cap]
    if scheme == "v1_512":
        return [x for x in [1, 2, 4, *range(8, 513, 8)] if x <= mnbt]
    if scheme == "v1_2seqs_8":
        return [x for x in [1, 2, 4, *range(8, min(max_seqs(dep) * 2, 512) + 1, 8)]
                if x <= mnbt]
    dql = 1 + dep.num_speculative_tokens if scheme == "v1_dql" else 1
    mx = min(min(max_seqs(dep) * dql * 2, CUDAGRAPH_MAX_CAPTURE_DEFAULT), mnbt)
    sizes = [x for x in (1, 2, 4) if x <= mx]
    sizes += list(range(8, min(mx + 1, 256), 8)) + list(range(256, mx + 1, 16))
    if scheme == "v1_dql" and mnbt <= mx and mnbt not in sizes:
        sizes.append(mnbt)
    return sorted(sizes)


def graph_modes(dep: Deployment, architecture: str | None = None) -> dict[str, list[int]]:
    """The graphs of each capture size (rows in ``GRAPH_MODES``). FULL_AND_PIECEWISE (the V1
    default from 0.11.0, vllm/config/compilation.py): a PIECEWISE graph per capture size; FULL
    graphs for uniform decode batches, sizes with dql ≤ x ≤ dql·max_num_seqs
    (vllm/v1/cudagraph_dispatcher.py). V1 before 0.11.0: PIECEWISE only; V0: one FULL graph of
    the whole forward per size."""
    sizes = capture_sizes(dep, architecture)
    mode = value_at(GRAPH_MODES, dep.engine_version, "FULL_AND_PIECEWISE")
    if mode == "FULL_AND_PIECEWISE":  # a pooling model: PIECEWISE only (vllm_pooling.py)
        mode = graph_mode(convert_of(dep), dep.engine_version or "") or mode
    if mode == "FULL":
        return {"FULL": sizes}
    if mode == "PIECEWISE":
        return {"PIECEWISE": sizes}
    dql = 1 + dep.num_speculative_tokens
    most = dql * max_seqs(dep)
    return {"PIECEWISE": sizes, "FULL": [x for x in sizes if dql <= x <= most]}


# FlashAttention 3's split-KV accumulators in FULL decode graphs. Where the model has FULL graphs
# and FA3 schedules ahead of time (``aot_schedule = get_flash_attn_version() == 3``: compute
# capability 9.x, vllm/attention/utils/fa_utils.py), vLLM's metadata builder fixes the split
# count of every batch up to the largest capture size ("Setting num_splits > 1 may increase the
# memory usage, because the intermediate buffers of size [num_splits, num_heads, num_tokens,
# head_size] are allocated. Therefore, we only set num_splits when using cuda graphs":
# v1/attention/backends/flash_attn.py ``FlashAttentionMetadataBuilder.build``, 0.11.0, 0.13.0,
# 0.19.0). FA3 takes the count as given (``params.num_splits = num_splits <= 0 ?
# get_num_splits(params) : num_splits``) and, above one split, allocates ``out_accum``
# [splits, heads, total_q, head_size_v] and ``softmax_lse_accum`` [splits, heads, total_q], both
# fp32, through torch (vllm-project/flash-attention hopper/flash_api.cpp ``mha_fwd``): inside a
# FULL capture they come from the graphs' private pool at each layer's attention and are freed
# after its combine kernel. A batch of more than 992 sequences runs one split (the same file,
# ``PREPARE_VARLEN_MAX_BATCHES_1CTA``).
FULL_GRAPH_SPLITS: tuple[Rule, ...] = (
    Rule(name="cudagraph_fa3_splits", changes="CUDA graphs: FA3 split-KV accumulators (FULL)",
         since="0.11.0", until=None, value=32,
         introduced_by="FULL_AND_PIECEWISE by default (first released in 0.11.0)",
         generation="v1",
         source="0.11.0 / 0.13.0 envs.py VLLM_FLASH_ATTN_MAX_NUM_SPLITS_FOR_CUDA_GRAPH default "
         "'32' (0.10.0 flash_attn.py _DEFAULT_MAX_NUM_SPLITS_FOR_CUDA_GRAPH = 16, FULL graphs "
         "not the default); 0.19.0 config/attention.py flash_attn_max_num_splits_for_cuda_graph "
         "= 32; v1/attention/backends/flash_attn.py build: max_num_splits where "
         "use_full_cuda_graph and num_actual_tokens <= max_cudagraph_size"),
)
FA3_ONE_SPLIT_ABOVE_SEQS = 992
# every architecture prefix some backend row fixes the split count on (a quick way out)
_SPLIT_ARCHS = frozenset(x for row in BACKEND_ROWS for x in row.graph_split_archs)


def full_graph_split_bytes(ctx: TermContext, tokens: int) -> dict[str, int]:
    """FA3's split-KV accumulators (``FULL_GRAPH_SPLITS``) of one layer's attention in a FULL
    graph of ``tokens`` tokens, per attention stage name (``activation_stages``: "attention
    (<kind>)"); empty where the layer's backend row has no ``graph_split_archs`` for this GPU,
    before 0.11.0, or above 992 sequences::

        splits × heads_local × tokens × (head_dim_v + 1) × 4 B

    A rank whose GQA layers differ in heads or head size takes the largest [approximation]."""
    dep = ctx.dep
    splits = int(value_at(FULL_GRAPH_SPLITS, dep.engine_version, 0))  # type: ignore[call-overload]
    if (splits <= 1 or not engine_of(dep).selects_attention_backend
            or tokens // (1 + dep.num_speculative_tokens) > FA3_ONE_SPLIT_ABOVE_SEQS):
        return {}
    arch = ctx.gpu.arch
    if not any(arch.startswith(x) for x in _SPLIT_ARCHS):
        return {}
    out: dict[str, int] = {}
    for layer, _n in rank_layer_kinds(ctx.spec, dep, ctx.coord):
        a = layer.attention
        if a.mixer is not None or layer in ctx.spec.mtp_layers:
            continue
        kind = attention_kind(a.kind, a.has_indexer)
        try:
            row = chosen(kind, arch, arch.startswith("gfx"), dep.kv_cache_dtype,
                         dep.attention_backend)
        except LookupError:  # no default backend for this kind here: none of these buffers
            continue
        if (row is None or kind not in row.kinds
                or not any(arch.startswith(x) for x in row.graph_split_archs)):
            continue
        b = splits * max(1, a.num_heads // dep.tp) * tokens * (a.v_head_dim + 1) * 4
        name = f"attention ({kind_of(a).name})"
        out[name] = max(out.get(name, 0), b)
    return out


# Kernel nodes per decoder layer in vLLM's compiled decode forward, as (GEMMs, other kernels),
# for linears in the model dtype [approximation where Inductor fuses elementwise work: one node
# per fused region]. Read off vLLM 0.11.0 (vllm/model_executor/models/llama.py, qwen3.py,
# deepseek_v2.py, vllm/model_executor/layers/mla.py ``MultiHeadLatentAttention.forward_native``):
# GQA: the qkv and o_proj GEMMs, the fused add+RMSNorm and the rotary kernel. MLA: the fused
# q_a/kv_a GEMM (kv_a and q_proj without a q LoRA), q_b and o_proj; the input fused
# add+RMSNorm, the q_a and kv_a RMSNorms and the rotary kernel. A dense MLP: gate_up and down,
# SiLU-and-mul and the fused add+RMSNorm. The fused MoE: ``moe_nodes``.
GRAPH_NODES_ATTENTION = {"gqa": (2, 2), "mla": (3, 4), "dsv4": (6, 4)}
# the q_a RMSNorm, counted above, that a layer without a q LoRA does not run
GRAPH_NODES_Q_LORA = {"mla": 1}
GRAPH_NODES_MLP = {"dense": (2, 2)}
# Kernels of the attention op itself (vLLM's splitting op: outside PIECEWISE graphs, inside
# FULL ones), (GEMMs, other). GQA (and the kinds without a row): the cache write and the decode
# kernel. MLA, vLLM 0.11.0 vllm/v1/attention/backends/mla/common.py ``MLACommonImpl.forward``
# and flashmla.py ``_forward_decode``: ``concat_and_cache_mla``, the W_UK_T bmm, the
# ``torch.cat`` of the absorbed q with q_pe, FlashMLA's split-KV kernel and its combine
# kernel, the W_UV bmm (``_v_up_proj``).
GRAPH_NODES_ATTENTION_OP = {"mla": (2, 4)}
GRAPH_NODES_ATTENTION_KERNELS = 2
# The fused MoE (vLLM 0.11.0 model_executor/layers/fused_moe/fused_moe.py ``fused_experts_impl``
# on the Triton path, ``fused_topk`` / ``fused_grouped_topk``; models/deepseek_v2.py
# ``DeepseekV2MoE.forward``): the router GEMM and the two grouped expert GEMMs; the
# post-attention fused add+RMSNorm, the routing (``topk_softmax``, one kernel; DeepSeek's
# noaux_tc ``fused_grouped_topk``: sigmoid, + e_score_correction_bias, the cast back to the
# scores' dtype, ``grouped_topk``, the weights' cast to fp32: five), the block alignment
# (``moe_align_block_size``: its align kernel and its count-and-sort kernel with more than 64
# experts, csrc/moe/moe_align_sum_kernels.cu; one below [approximation: the one-kernel path
# also needs fewer than 1,024 routed rows]), the activation and ``moe_sum``; a shared expert
# adds its gate_up and down GEMMs, its SiLU-and-mul and the scale-and-add of the two outputs.
# The fused MoE runs eagerly inside the graphs (a custom op, ``torch.ops.vllm.moe_forward``,
# 0.10.0 / 0.11.0 fused_moe/layer.py), so Inductor fuses none of these kernels.
MOE_ROUTING_NODES = {"softmax": 1, "noaux_tc": 5}
# vLLM's softmax routing cast the router's logits to fp32 before ``topk_softmax`` up to 0.11.0
# (``gating_output.float()`` in fused_moe.py ``fused_topk``): one kernel more where the logits
# are in the model's 16-bit dtype. From 0.11.1 ``topk_softmax`` takes them as they are.
MOE_ROUTER_CAST: tuple[Rule, ...] = (
    Rule(name="cudagraph_moe_router_cast", changes="CUDA graphs: kernel nodes of a fused MoE",
         since=None, until="0.11.1", value=1, introduced_by="before 0.7.1",
         removed_by="topk_softmax on the 16-bit logits (first released in 0.11.1)",
         source="0.8.4 / 0.10.0 / 0.11.0 model_executor/layers/fused_moe/fused_moe.py "
         "fused_topk: gating_output_float = gating_output.float() before topk_softmax",
         applies_to="all"),
    Rule(name="cudagraph_moe_router_cast", changes="CUDA graphs: kernel nodes of a fused MoE",
         since="0.11.1", until=None, value=0,
         introduced_by="topk_softmax on the 16-bit logits (first released in 0.11.1)",
         source="0.11.1 / 0.12.0 / 0.14.0 fused_moe.py fused_topk and 0.33.0 fused_moe/router/"
         "fused_topk_router.py fused_topk: gating_output passed to the top-k kernel uncast",
         applies_to="all"),
)
# A router that renormalises its top-k weights (``FusedMoE(renormalize=True)``: Qwen2/Qwen3-MoE
# and Qwen3-Next by ``norm_topk_prob``, Mixtral, gpt-oss and Granite-4.0-H always:
# ``MLP.renormalize``) divided them by their sum after ``topk_softmax`` up to 0.11.0
# (``topk_weights / topk_weights.sum(dim=-1, keepdim=True)`` in fused_moe.py
# ``vllm_topk_softmax``, inline in ``fused_topk`` before it): a reduction and a division, two
# kernels, inside the eager custom op. From 0.11.1 ``topk_softmax`` takes ``renormalize`` and
# does it in its own kernel.
MOE_RENORMALIZE: tuple[Rule, ...] = (
    Rule(name="cudagraph_moe_renormalize", changes="CUDA graphs: kernel nodes of a fused MoE",
         since=None, until="0.11.1", value=2, introduced_by="before 0.7.1",
         removed_by="topk_softmax renormalises in its kernel (first released in 0.11.1)",
         source="0.8.4 / 0.10.1.1 / 0.10.2 / 0.11.0 model_executor/layers/fused_moe/fused_moe.py "
         "vllm_topk_softmax: ops.topk_softmax(...), then 'if renormalize: topk_weights = "
         "topk_weights / topk_weights.sum(dim=-1, keepdim=True)'",
         applies_to="all"),
    Rule(name="cudagraph_moe_renormalize", changes="CUDA graphs: kernel nodes of a fused MoE",
         since="0.11.1", until=None, value=0,
         introduced_by="topk_softmax renormalises in its kernel (first released in 0.11.1)",
         source="0.11.1 / 0.11.2 fused_moe.py vllm_topk_softmax: ops.topk_softmax(topk_weights, "
         "topk_indices, token_expert_indices, gating_output, renormalize), no division after it",
         applies_to="all"),
)
# MXFP4 experts on Marlin (SM90 before 0.12.0: ``memprof.core.weights.mlp.moe_caches_per_call``):
# ``Mxfp4MoEMethod.apply`` calls ``fused_marlin_moe`` without the layer's workspace, so each
# call makes one (``marlin_make_workspace_new``: ``torch.zeros(sms * 4, dtype=torch.int)``), a
# fill kernel before the two Marlin GEMMs (0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2
# quantization/mxfp4.py ``apply`` and fused_moe/fused_marlin_moe.py: "if workspace is None:
# workspace = marlin_make_workspace_new(hidden_states.device, 4)"); its top-k sum is
# ``torch.sum``, one kernel as ``moe_sum`` is.
MXFP4_MARLIN_WORKSPACE_FILL = 1
# With expert parallelism the Triton path maps the aligned blocks' global expert ids to the
# rank's local ones (``expert_ids = expert_map[expert_ids]`` in ``moe_align_block_size``,
# 0.8.4 / 0.10.0 / 0.11.0 / 0.33.0 fused_moe/moe_align_block_size.py): one index kernel more.
MOE_EP_EXPERT_MAP: tuple[Rule, ...] = (
    Rule(name="cudagraph_moe_ep_expert_map", changes="CUDA graphs: kernel nodes of a fused MoE",
         since=None, until=None, value=1, introduced_by="before 0.7.1",
         source="0.8.4 / 0.10.0 / 0.11.0 / 0.33.0 model_executor/layers/fused_moe/"
         "moe_align_block_size.py moe_align_block_size: expert_ids = expert_map[expert_ids] "
         "where an expert map is given (expert parallelism)", applies_to="all"),
)
# fp8 block-quantised linears (vLLM 0.11.0 model_executor/layers/quantization/utils/fp8_utils.py
# ``apply_w8a8_block_fp8_linear``, a custom op, CUTLASS path; DeepGEMM is not in vLLM's wheel):
# ``per_token_group_fp8_quant`` of the input before the GEMM, and on SM90 the ``F.pad`` of the
# rows to a multiple of 4 before it (ATen ``constant_pad_nd`` on CUDA: a fill and a copy),
# kernels beside the GEMM. The fused MoE quantises its two expert GEMMs' inputs (one kernel
# each, ``moe_kernel_quantize_input``).
FP8_BLOCK_QUANT_NODES = 1
FP8_BLOCK_PAD_NODES_SM90 = 2
# The SM90 pad by release: vLLM pads the rows only from 0.10.2, when the blockwise GEMM became
# CUTLASS's own (its M must be a multiple of 4); before, the linear is the quantisation and the
# GEMM. ``num_pad = 4 - rows % 4`` is never 0, so from 0.10.2 every call pads.
FP8_BLOCK_PAD_SM90: tuple[Rule, ...] = (
    Rule(name="cudagraph_fp8_block_pad_sm90",
         changes="CUDA graphs: kernel nodes of an fp8 block linear on SM90",
         since=None, until="0.10.2", value=0, introduced_by="before 0.7.1",
         removed_by="F.pad of the rows to a multiple of 4 on SM90 (first released in 0.10.2)",
         source="0.8.4 / 0.10.0 / 0.10.1.1 model_executor/layers/quantization/utils/"
         "fp8_utils.py apply_w8a8_block_fp8_linear: per_token_group_quant_fp8 and the GEMM, "
         "no padding (0.10.0 / 0.10.1.1: 'TODO: update this after switching to public sm90 "
         "block scale gemm')", applies_to="fp8_block"),
    Rule(name="cudagraph_fp8_block_pad_sm90",
         changes="CUDA graphs: kernel nodes of an fp8 block linear on SM90",
         since="0.10.2", until=None, value=FP8_BLOCK_PAD_NODES_SM90,
         introduced_by="F.pad of the rows to a multiple of 4 on SM90 (first released in 0.10.2)",
         source="0.10.2 / 0.11.0 fp8_utils.py apply_w8a8_block_fp8_linear: on capability 90 "
         "torch.nn.functional.pad(input_2d, (0, 0, 0, num_pad)) with num_pad = 4 - rows % 4 "
         "('cutlass blockwise gemm limitation for hopper'), then per_token_group_quant_fp8",
         applies_to="fp8_block"),
)


def fp8_block_linears(ctx: TermContext) -> bool:
    """The rank's linears are fp8 block-quantised (a checkpoint's ``weight_block_size``) on the
    CUTLASS / Triton path (not Marlin)."""
    q = ctx.spec.quant
    return (q is not None and q.method == "fp8" and q.block is not None
            and not fp8_on_marlin(q, ctx.gpu.arch))


def linear_extra_nodes(ctx: TermContext) -> int:
    """Kernels an fp8 block linear launches beside its GEMM (``FP8_BLOCK_*``); 0 for linears in
    the model dtype."""
    if not fp8_block_linears(ctx):
        return 0
    pad = 0
    if ctx.gpu.arch.startswith("sm90"):
        dep = ctx.dep  # an engine whose releases memprof does not read keeps the newest count
        pad = int(str(value_at(FP8_BLOCK_PAD_SM90, dep.engine_version, FP8_BLOCK_PAD_NODES_SM90)
                      if engine_of(dep).graph_estimate_by_release else FP8_BLOCK_PAD_NODES_SM90))
    return FP8_BLOCK_QUANT_NODES + pad


def moe_nodes(ctx: TermContext, mlp: MLP, extra: int | None = None) -> tuple[int, int]:
    """(GEMMs, other kernels) of one fused-MoE layer in a decode graph (``MOE_ROUTING_NODES``
    and the comment above it; a renormalising router's sum and division before 0.11.1,
    ``MOE_RENORMALIZE``; the per-call workspace fill of MXFP4 experts on Marlin,
    ``MXFP4_MARLIN_WORKSPACE_FILL``), fp8 block quantisation's kernels included (``extra``: the
    rank's ``linear_extra_nodes``, where the caller has it)."""
    dep = ctx.dep
    noaux = bool(mlp.e_score_correction_bias)
    route = MOE_ROUTING_NODES["noaux_tc" if noaux else "softmax"]
    if not noaux:
        route += int(str(value_at(MOE_ROUTER_CAST, dep.engine_version, 0, engine=dep.engine)))
        if mlp.renormalize:
            route += int(str(value_at(MOE_RENORMALIZE, dep.engine_version, 0,
                                      engine=dep.engine)))
    align = 2 if mlp.num_experts > 64 else 1
    if dep.enable_expert_parallel and dep.ep_size > 1:
        align += int(str(value_at(MOE_EP_EXPERT_MAP, dep.engine_version, 0, engine=dep.engine)))
    gemm, other = 3, 1 + route + align + 2
    if (engine_of(dep).graph_estimate_by_release
            and moe_caches_per_call(ctx.spec.quant, ctx.gpu.arch, dep.engine_version)):
        other += MXFP4_MARLIN_WORKSPACE_FILL
    if extra is None:
        extra = linear_extra_nodes(ctx)
    if extra:
        other += 2 * FP8_BLOCK_QUANT_NODES  # the experts' input quantisation
    if mlp.shared_intermediate_size:
        gemm += 2
        other += 2 + 2 * extra
    return gemm, other


def attention_nodes(ctx: TermContext, layer: Layer, mode: str,
                    extra: int | None = None) -> tuple[int, int]:
    """(GEMMs, other kernels) of a layer's attention in a ``mode`` graph: its projections'
    (``GRAPH_NODES_ATTENTION``, the q_a RMSNorm only where the layer has a q LoRA, and the fp8
    block kernels of each projection GEMM: ``extra``, the rank's ``linear_extra_nodes``) and,
    in FULL graphs, the attention op's (``GRAPH_NODES_ATTENTION_OP``)."""
    kind, a = layer.attention.kind, layer.attention
    g, o = GRAPH_NODES_ATTENTION.get(kind, GRAPH_NODES_ATTENTION["gqa"])
    if extra is None:
        extra = linear_extra_nodes(ctx)
    o += g * extra - (0 if a.q_lora_rank else GRAPH_NODES_Q_LORA.get(kind, 0))
    if mode == "FULL":
        og, oo = GRAPH_NODES_ATTENTION_OP.get(kind, (0, GRAPH_NODES_ATTENTION_KERNELS))
        g, o = g + og, o + oo
    return g, o


def mlp_nodes(ctx: TermContext, layer: Layer, extra: int | None = None) -> tuple[int, int]:
    """(GEMMs, other kernels) of a layer's MLP: ``moe_nodes``, or the dense row (with its two
    linears' fp8 kernels: ``extra``, the rank's ``linear_extra_nodes``)."""
    if extra is None:
        extra = linear_extra_nodes(ctx)
    if layer.mlp.kind == "moe":
        return moe_nodes(ctx, layer.mlp, extra)
    g, o = GRAPH_NODES_MLP["dense"]
    return g, o + 2 * extra


def graph_pieces(ctx: TermContext) -> int:
    """Graphs per PIECEWISE capture size: vLLM splits the compiled forward at every attention op
    (``CompilationConfig.splitting_ops``, vllm/config/compilation.py @v0.33.0) and captures one
    graph per piece, so a stage with L attention layers has L + 1 pieces. So already in 0.8.4:
    config.py ``set_splitting_ops_for_v1`` splits at ``vllm.unified_attention`` and
    ``vllm.unified_attention_with_output``, and compilation/backends.py ``PiecewiseBackend``
    captures one ``torch.cuda.CUDAGraph`` per piece and capture size, every one into the
    process's single ``global_graph_pool``; a piece's output is kept only as a weak reference
    (``weak_ref_tensors``), so nothing stays allocated per graph between captures. A sparse MLA
    layer's indexer op splits it once more where ``INDEXER_SPLIT`` holds."""
    return _non_mtp_layers(ctx) + 1 + _indexer_splits(ctx, mtp=False)


# The lightning indexer's op splits the compiled forward too: CompilationConfig._attention_ops
# lists "vllm::sparse_attn_indexer" from 0.11.1 (absent in 0.11.0), the op DeepSeek-V3.2's
# indexer calls (0.11.1 model_executor/models/deepseek_v2.py Indexer.forward; from 0.19.0
# layers/sparse_attn_indexer.py SparseAttnIndexer.forward_cuda). Counted for the sparse MLA
# layers (kv_dtypes.attention_kind); DeepSeek-V4's compressed layers call the same class, not
# read for their pieces.
INDEXER_SPLIT: tuple[Rule, ...] = (
    Rule(name="cudagraph_indexer_split", changes="CUDA graphs: pieces of a sparse MLA layer",
         since="0.11.1", until=None, applies_to="sparse_mla",
         introduced_by="0.11.1: 'vllm::sparse_attn_indexer' in CompilationConfig._attention_ops "
         "(absent in 0.11.0)",
         source="0.11.1 / 0.12.0 / 0.13.0 / 0.15.0 / 0.17.0 / 0.19.0 / 0.21.0 / 0.24.0 / 0.27.0 / "
         "0.30.0 / 0.33.0 config/compilation.py CompilationConfig._attention_ops; 0.11.1 "
         "model_executor/models/deepseek_v2.py Indexer.forward, 0.19.0 / 0.33.0 "
         "layers/sparse_attn_indexer.py SparseAttnIndexer.forward_cuda "
         "(torch.ops.vllm.sparse_attn_indexer)"),
)


def _indexer_splits(ctx: TermContext, *, mtp: bool) -> int:
    """The rank's sparse MLA layers (``mtp``: its MTP layers; else the others), each one more
    piece where ``INDEXER_SPLIT`` holds; 0 elsewhere."""
    if rule_in_force(INDEXER_SPLIT, ctx.dep.engine_version, ctx.dep.engine) is None:
        return 0
    return sum(n for layer, n in rank_layer_kinds(ctx.spec, ctx.dep, ctx.coord)
               if layer.is_mtp == mtp
               and attention_kind(layer.attention.kind, layer.attention.has_indexer)
               == SPARSE_MLA)


def _non_mtp_layers(ctx: TermContext) -> int:
    """The rank's layers that are not MTP layers, counted by layer kind (``rank_layer_kinds``,
    kept by value; an MTP layer is a kind of its own, ``is_mtp``), not layer by layer."""
    mtp = ctx.spec.mtp_layers
    return sum(n for layer, n in rank_layer_kinds(ctx.spec, ctx.dep, ctx.coord)
               if layer not in mtp)


def graph_nodes(ctx: TermContext, mode: str) -> tuple[int, int]:
    """(GEMM nodes, other nodes) of one capture size's graphs, all pieces together."""
    return _graph_nodes(ctx, mode)


def tp_all_reduces(ctx: TermContext) -> int:
    """TP all-reduces of one forward of the rank: two a decoder layer (after the attention's
    o_proj and after the MLP or MoE), and the vocabulary-parallel embedding's on the first
    pipeline stage (vLLM ``VocabParallelEmbedding.forward``: ``tensor_model_parallel_all_reduce``
    of the masked lookup, vllm/model_executor/layers/vocab_parallel_embedding.py; the trace's
    replica issues the same, ``memprof/trace/replica.py``)."""
    if ctx.dep.tp <= 1:
        return 0
    return 2 * _non_mtp_layers(ctx) + (1 if ctx.coord.pp_stage == 0 else 0)


def graph_nccl_nodes(ctx: TermContext) -> int:
    """NCCL nodes of one capture size's graphs, all pieces together: the TP all-reduces
    (``tp_all_reduces``) where the engine's custom all-reduce does not replace them
    (``custom_all_reduce_applies``); where it does, they are kernel nodes among the others.

    So in every V1 release read: vLLM 0.8.4 distributed/device_communicators/
    cuda_communicator.py ``CudaCommunicator.all_reduce`` tries the custom all-reduce and
    otherwise calls PyNccl's ``all_reduce``, an out-of-place ``ncclAllReduce`` on the current
    stream (pynccl.py), which under ``graph_capture`` is the capture stream
    (distributed/parallel_state.py ``GroupCoordinator.graph_capture`` enters only the custom
    all-reduce's ``capture()``); custom_all_reduce.py turns itself off, before allocating its
    buffers, on more than two PCIe-only GPUs and where the P2P test fails ("your platform
    lacks GPU P2P capability"), which a deployment states with
    ``disable_custom_all_reduce``."""
    if ctx.dep.tp <= 1 or custom_all_reduce_applies(ctx.dep, ctx.gpu):
        return 0
    return tp_all_reduces(ctx)


def _graph_nodes(ctx: TermContext, mode: str) -> tuple[int, int]:
    gemm = other = 0
    extra = linear_extra_nodes(ctx)  # one answer for every linear of the rank
    # a layer's nodes read its attention and MLP alone: each kind counted once, times its layers
    for layer, n in rank_layer_kinds(ctx.spec, ctx.dep, ctx.coord):
        if layer in ctx.spec.mtp_layers:
            continue
        ag, ao = attention_nodes(ctx, layer, mode, extra)
        mg, mo = mlp_nodes(ctx, layer, extra)
        gemm += n * (ag + mg)
        other += n * (ao + mo)
    if ctx.dep.tp > 1 and custom_all_reduce_applies(ctx.dep, ctx.gpu):
        other += tp_all_reduces(ctx)  # the custom all-reduce kernels
    other += lora_graph_nodes(ctx)  # --enable-lora's punica kernels (terms/lora.py)
    bnb_gemm, bnb_other = bnb_graph_nodes(ctx)  # bitsandbytes' loop (terms/bnb_linear.py)
    return gemm + bnb_gemm, other + bnb_other


def graph_driver_bytes(ctx: TermContext, mode: str, sizes: int) -> int:
    """Driver memory of ``sizes`` capture sizes of ``mode`` (not counting the first graph's); the
    kernel nodes at the release's driver stack (``node_costs``)."""
    return sizes * _driver_per_size(ctx, mode)


def _driver_per_size(ctx: TermContext, mode: str) -> int:
    """Driver memory of one capture size of ``mode``: its graphs (one per piece where
    PIECEWISE) and their GEMM, other and NCCL nodes, and where PIECEWISE the V1 drafter's
    pieces captured at the same size (``drafter_driver_per_size``); every term of
    ``graph_driver_bytes`` grows with the sizes, so the model reads this once a mode."""
    graphs = graph_pieces(ctx) if mode == "PIECEWISE" else 1
    gemm, other = graph_nodes(ctx, mode)
    per_gemm, per_other = node_costs(ctx)
    return (graphs * GRAPH_DRIVER_PER_GRAPH
            + gemm * per_gemm + other * per_other
            + graph_nccl_nodes(ctx) * GRAPH_DRIVER_PER_NCCL_NODE
            + nccl_mixing_nodes(ctx, mode) * GRAPH_DRIVER_NCCL_MIXING
            + graph_net_graphs(ctx, mode) * GRAPH_DRIVER_NET_PER_GRAPH
            + (drafter_driver_per_size(ctx) if mode == "PIECEWISE" else 0))


# The MTP predictor's own kernels around its layer, by its input projection
# (Family.mtp_predictor_input; model_executor/models/deepseek_mtp.py
# DeepSeekMultiTokenPredictorLayer.forward, 0.33.0): (GEMMs, other kernels) = eh_proj;
# the embedding gather, the position-0 mask (torch.where), enorm, hnorm and the concatenation
# [approximation: one kernel each, as the eager code launches them; Inductor may fuse some]
MTP_PREDICTOR_NODES = {"eh_proj": (1, 5), "fc": (1, 4)}
# An EAGLE head's layer as a dense GQA decoder layer (GRAPH_NODES_ATTENTION "gqa" +
# GRAPH_NODES_MLP "dense") and its input fc
EAGLE_FC_NODES = (1, 0)


def drafter_graph_nodes(ctx: TermContext) -> tuple[int, int, int, int]:
    """(graphs, GEMM nodes, other nodes, TP collectives) the V1 drafter adds to one PIECEWISE
    capture size (memprof/core/terms/drafter_graphs.py), zeros where it captures none. The MTP
    drafter runs one MTP layer a forward (``DeepSeekMTP.forward``: ``spec_step_idx %
    num_mtp_layers``), so its pieces are that layer's attention (and indexer, where
    ``INDEXER_SPLIT`` holds) + 1; an EAGLE head's, its
    layers + 1. Its TP collectives: the layer's two all-reduces, and the MTP predictor's
    vocabulary-parallel embedding's (an EAGLE head takes the target's embedding outside its
    graphs)."""
    how = drafter_captures(ctx)
    if how is None:
        return 0, 0, 0, 0
    tp = ctx.dep.tp
    if how == "mtp":
        layer = ctx.spec.mtp_layers[0]
        extra = linear_extra_nodes(ctx)
        ag, ao = attention_nodes(ctx, layer, "PIECEWISE", extra)
        mg, mo = mlp_nodes(ctx, layer, extra)
        entry = family_row(ctx.spec.family).mtp_predictor_input
        pg, po = MTP_PREDICTOR_NODES[entry[0] if entry else "eh_proj"]
        split = 1 if _indexer_splits(ctx, mtp=True) else 0  # the MTP layer's indexer op
        return 2 + split, ag + mg + pg, ao + mo + po, (3 if tp > 1 else 0)
    head = ctx.spec.draft_head
    assert head is not None
    ag, ao = GRAPH_NODES_ATTENTION["gqa"]
    mg, mo = GRAPH_NODES_MLP["dense"]
    n = head.num_layers
    return (n + 1, n * (ag + mg) + EAGLE_FC_NODES[0], n * (ao + mo) + EAGLE_FC_NODES[1],
            2 * n if tp > 1 else 0)


def drafter_driver_per_size(ctx: TermContext) -> int:
    """Driver memory of the V1 drafter's graphs at one PIECEWISE size (``drafter_graph_nodes``):
    its graphs, GEMM and other nodes at the release's node costs, and its TP collectives as
    the target's are (kernel nodes under the custom all-reduce, else NCCL nodes, each paying
    NCCL's graph mixing where its record sits in line, at most two a graph where a leaf)."""
    graphs, gemm, other, collectives = drafter_graph_nodes(ctx)
    if not graphs:
        return 0
    per_gemm, per_other = node_costs(ctx)
    out = graphs * GRAPH_DRIVER_PER_GRAPH + gemm * per_gemm + other * per_other
    if collectives and custom_all_reduce_applies(ctx.dep, ctx.gpu):
        return out + collectives * per_other
    if collectives:
        mixing = (collectives if nccl_record_placement(ctx) == "in line"
                  else min(collectives, 2 * graphs))
        out += collectives * GRAPH_DRIVER_PER_NCCL_NODE + mixing * GRAPH_DRIVER_NCCL_MIXING
    return out


def nccl_record_placement(ctx: TermContext) -> str:
    """Where the NCCL the rank's engine release runs (``memprof.core.terms.nccl.nccl_version``)
    puts its graph-mixing record node (``NCCL_RECORD_PLACEMENT``): "in line" or "leaf". On a
    ROCm card the engine runs RCCL, whose releases were not read, and for an engine whose NCCL
    memprof does not map: "in line", the placement the NCCL-node costs were measured under
    [assumption]."""
    if ctx.gpu.is_rocm:
        return "in line"
    return NCCL_RECORD_PLACEMENT.get(nccl_version(ctx.dep) or "", "in line")


def nccl_mixing_nodes(ctx: TermContext, mode: str) -> int:
    """NCCL nodes of one capture size of ``mode`` that pay ``GRAPH_DRIVER_NCCL_MIXING``: every
    one where the record node sits in line; where it is a leaf, at most two a graph
    (``NCCL_RECORD_PLACEMENT``): a FULL size's graph holds every TP all-reduce and pays for
    two; a PIECEWISE size's pieces each hold one or two (a piece runs from one attention op
    to the next: the o_proj and MLP all-reduces), so all of them pay [approximation: at most
    two a piece]."""
    nodes = graph_nccl_nodes(ctx)
    if nodes == 0 or nccl_record_placement(ctx) == "in line":
        return nodes
    graphs = graph_pieces(ctx) if mode == "PIECEWISE" else 1
    return min(nodes, 2 * graphs)


def graph_net_graphs(ctx: TermContext, mode: str) -> int:
    """Graphs of one capture size of ``mode`` holding an NCCL node whose communicator reaches
    other hosts over NCCL's NET transport (``GRAPH_DRIVER_NET_PER_GRAPH``): where the TP group
    spans nodes (``memprof.core.nodes.spans_nodes``; the custom all-reduce is then off, so its
    all-reduces are NCCL nodes), every graph of the size [approximation: each piece holds one of
    the TP all-reduces, the embedding's in the first, a layer's o_proj all-reduce in each
    later one]; one for a FULL size."""
    nccl = graph_nccl_nodes(ctx)
    if nccl == 0 or not spans_nodes(ctx.dep, "TP"):
        return 0
    return min(graph_pieces(ctx) if mode == "PIECEWISE" else 1, nccl)


def graph_driver_first(ctx: TermContext) -> int:
    """The first graph's 70 MiB, which is torch's CUDA stream pool made for the capture stream
    (reports/gpu/nccl/README.md): 0 on a rank whose NCCL communicator made the pool and whose
    init figure counts it (``memprof.core.terms.stream_pool.nccl_made_stream_pool``; not vLLM's
    PyNccl communicators, ``memprof.core.terms.pynccl_pool``; graph-collectives-2x-h100-stream.json:
    the side stream costs 0 B where ProcessGroupNCCL made the pool, 73,400,320 B where not),
    and 0 where the profile run's side made it before, which charges it as non-torch memory:
    vLLM's model runner (0.11.0-0.19.x) or the TP logits gather on ProcessGroupNCCL
    (``memprof.core.terms.stream_pool.pool_before_graphs``), or where a stream of the engine's
    own made it before the capture (``Engine.stream_pool_before_graphs``; its component is
    ``stream_pool_outside_graphs``)."""
    if pool_before_graphs(ctx) or stream_pool_outside_graphs(ctx) is not None:
        return 0
    return GRAPH_DRIVER_FIRST


def stream_pool_outside_graphs(ctx: TermContext) -> Component | None:
    """torch's stream pool where a stream of the engine's own made it before the decode capture
    on a rank whose NCCL communicators did not (``Engine.stream_pool_before_graphs``): one
    non-torch component, where the graphs are, so that the capture's figure leaves it out and
    the rank's total keeps it; None elsewhere."""
    if pool_before_graphs(ctx):
        return None
    made = engine_of(ctx.dep).stream_pool_before_graphs(ctx.dep, ctx.gpu, ctx.spec)
    if made is None:
        return None
    maker, before_load = made
    return Component(
        name="torch stream pool (made before the CUDA graphs)", category="non_torch",
        bytes=GRAPH_DRIVER_FIRST, where="baseline" if before_load else "budget",
        profiled=True,
        formula=f"73,400,320 B: torch's CUDA stream pool, made by {maker} before the decode "
        "graphs are captured, so the capture's logged figure does not hold it"
        + (", and before the model loads, so it is in the free memory read before the load"
           if before_load else "") + " (memprof/core/terms/stream_pool.py)")


def graph_pool_tensor_bytes(ctx: TermContext, modes: dict[str, list[int]]) -> int:
    """What the graphs' private pool reserves for tensors: the decode live sets
    (``activation_stages``) of each mode's largest size, allocated and freed in capture order
    (PIECEWISE first, then FULL) through ``memprof.alloc``'s replica of the caching allocator
    (segment rounding and reuse as a private pool does them), plus the cuBLAS workspace of the
    capture stream (vLLM captures on a new stream, ``graph_capture`` in
    vllm/distributed/parallel_state.py @v0.33.0, and cuBLAS keeps one workspace per (handle,
    stream), PyTorch CublasHandlePool.cpp; where torch captures on the stream the eager warm-up
    ran on, V0 and V1 from 0.14.0, that workspace is the warm-up's, allocated before the capture
    in the ordinary pool, and counted here all the same: ``graph_log.CAPTURE_STREAM`` places it
    for the logged figure). Smaller sizes are captured after the largest and
    reuse its blocks (but for FA3's split-KV accumulators of a smaller FULL size:
    ``_pool_stages``); replaying all 86 sizes moved the result by 0-6 MiB on the traced models,
    both ways against the H200, at 20× the cost [approximation]. A FULL mode's attention stages
    also hold FlashAttention 3's split-KV accumulators where it runs them
    (``full_graph_split_bytes``)."""
    seq: tuple[tuple[int, ...], ...] = ()
    for mode in ("PIECEWISE", "FULL"):
        if modes.get(mode):
            seq += _pool_stages(ctx, mode, modes[mode])
    return _pool_reserved(seq) + cublas_workspace_bytes(ctx.gpu)


def graph_pool_tensor_bytes_apart(ctx: TermContext, modes: dict[str, list[int]],
                                  apart: str) -> int:
    """The private pool's tensor bytes where the graphs of mode ``apart`` are captured on a
    stream of their own, the other modes on the stream the warm-up ran on (Model Runner V2's
    FULL graphs: ``memprof.core.graph_log.V2_FULL_CAPTURE_STREAM``). The caching allocator
    hands out a free block only to a request on the stream it was allocated on (PyTorch
    c10/cuda/CUDACachingAllocator.cpp ``get_free_block``: ``(*it)->stream != p.stream()``
    fails the search; the pool's blocks are ordered by stream, then size), in a private pool as
    in the ordinary one, so the ``apart`` mode's live sets cannot reuse the blocks the others
    left and get segments of their own; and the first GEMM on that stream, under capture,
    allocates its cuBLAS workspace in the pool (CublasHandlePool.cpp: one workspace per
    (handle, stream)). The other modes' workspace is the warm-up's, outside the pool::

        tensors = reserved(other modes' stages) + reserved(apart's stages) + workspace
    """
    together = tuple(st for m in ("PIECEWISE", "FULL") if m != apart and modes.get(m)
                     for st in _pool_stages(ctx, m, modes[m]))
    own = _pool_stages(ctx, apart, modes[apart]) if modes.get(apart) else ()
    return (_pool_reserved(together) + _pool_reserved(own)
            + (cublas_workspace_bytes(ctx.gpu) if own else 0))


def _pool_stages(ctx: TermContext, mode: str, sizes: list[int],
                 top_stages: tuple[tuple[int, ...], ...] | None = None
                 ) -> tuple[tuple[int, ...], ...]:
    """The live sets a mode's capture leaves its mark on the pool with: its largest size's, then,
    where that size runs FA3 in one split (above ``FA3_ONE_SPLIT_ABOVE_SEQS`` sequences) and a
    smaller one runs the split-KV accumulators (``full_graph_split_bytes``), the largest such
    size's, captured after it (vLLM captures the sizes in descending order into one pool,
    v1/worker/gpu_model_runner.py ``_capture_cudagraphs``): its accumulators can outgrow the
    larger size's live set (gpt-oss's sizes to 1024, ``Family.max_capture``, at 1,024 sequences)."""
    top = max(sizes)
    # (``top_stages``: the caller's ``_mode_stages`` of the largest size, not computed twice)
    seq = _mode_stages(ctx, mode, top) if top_stages is None else top_stages
    if mode != "FULL" or full_graph_split_bytes(ctx, top):
        return seq
    # whether a size runs the accumulators depends on it only through the one-split threshold
    # (``full_graph_split_bytes``), so the largest size at or below it is the one to ask about
    below = [x for x in sizes
             if x // (1 + ctx.dep.num_speculative_tokens) <= FA3_ONE_SPLIT_ABOVE_SEQS]
    if not below or not full_graph_split_bytes(ctx, max(below)):
        return seq
    return seq + _mode_stages(ctx, mode, max(below))


def _mode_stages(ctx: TermContext, mode: str, tokens: int) -> tuple[tuple[int, ...], ...]:
    """The block sizes of each decode live set a capture of ``mode`` at ``tokens`` allocates in
    the private pool, in order (``graph_pool_tensor_bytes``)."""
    accum = full_graph_split_bytes(ctx, tokens) if mode == "FULL" else {}
    seq = []
    for st in activation_stages(ctx, tokens=tokens, rows=0, decode=True):
        extra = accum.get(st.name, 0)
        seq.append(tuple(b for _n, b in st.parts if b > 0) + ((extra,) if extra else ()))
    return tuple(seq)


@lru_cache(maxsize=256)
def _pool_reserved(stages: tuple[tuple[int, ...], ...]) -> int:
    """Reserved bytes of a private pool after each stage is allocated and freed in turn (the
    simulator's result, from free-block sizes: ``memprof.alloc.monotone``)."""
    from memprof.alloc.monotone import pool_reserved_by_stages

    return pool_reserved_by_stages(stages)


@dataclass(frozen=True, slots=True)
class GraphModel:
    """CUDA-graph memory of a rank (bytes): capture sizes per mode, the first-capture sample per
    mode, vLLM's per-graph sample per mode, its estimate, and memprof's prediction of the pool."""

    modes: dict[str, list[int]]
    first_capture: dict[str, int]  # per mode: vLLM's first sample (its largest size)
    per_graph_sample: dict[str, int]  # per mode: vLLM's second sample, floored at 1 MiB
    estimate: int  # what vLLM subtracts from the KV budget
    actual: int  # memprof's prediction of what the capture adds: tensors + driver
    driver: int  # the part of ``actual`` that is driver memory for the graph executables
    graphs: int  # graph executables captured (a PIECEWISE size is one per piece)
    kept: str = ""  # the engine's own graphs: what the capture keeps beyond the live sets
    state: str = ""  # the engine's own graphs: the attention backend's capture state
    pool: int = 0  # the engine's own graphs: the private pool's part of the tensors


def cudagraph_model(ctx: TermContext, sizes: dict[str, list[int]] | None = None) -> GraphModel:
    """vLLM's estimate and memprof's prediction of the graph memory (vLLM@52a31cc and v0.33.0
    gpu_model_runner.py ``profile_cudagraph_memory`` / ``capture_model``).

    What capturing adds to the device's use (the ``mem_get_info`` delta vLLM logs as "took")::

        tensors = the private pool's reserved bytes (``graph_pool_tensor_bytes``)
        driver  = 70 MiB (first graph; 0 on a rank with an NCCL communicator, which made
                  torch's stream pool already) + 0.107 MiB × graphs + 3.27 KiB × GEMM nodes
                  + 2.26 KiB × other nodes (10 KiB a kernel node, GEMM or not, at a vLLM
                  release before 0.20.0: ``DRIVER_STACK``) + (8.45 + 144.9) KiB × NCCL nodes (TP
                  all-reduces where the custom all-reduce does not replace them; the second
                  figure is NCCL's graph mixing support, ``GRAPH_DRIVER_NCCL_MIXING``, paid by
                  at most two a graph where the release's NCCL puts its record node as a leaf,
                  2.26.2 - 2.27.3: ``nccl_mixing_nodes``)
                  + 102.4 KiB × graphs holding one where the TP group spans hosts (NCCL's NET
                  transport: ``GRAPH_DRIVER_NET_PER_GRAPH``)
        graphs  = Σ PIECEWISE sizes × (attention layers + 1) + FULL sizes
        actual  = tensors + driver

    vLLM's estimate captures the two largest sizes of each mode into a fresh pool and measures
    each; the first pays the pool's tensors, the first graph's driver cost (first mode only) and
    its size's graphs; the second only its graphs (floored at 1 MiB)::

        estimate = max over modes of first[mode] + Σ_modes per_graph[mode] · (n_mode − 1)

    Checked against ``memprof trace`` on one H200 (reports/gpu/trace): Qwen3-0.6B, Llama-3.1-8B,
    Qwen3-32B at 256 sequences (the replica's attention is memprof's own, so those traces hold
    none of FA3's accumulators). FULL captures under FlashAttention 3 hold its split-KV
    accumulators at each attention (``full_graph_split_bytes``, inside
    ``graph_pool_tensor_bytes``). FlashInfer's workspace, made by the first metadata build, is in
    the FULL mode's first sample from 0.18.0 (``attn_capture.estimate_window_workspace``). Not
    modelled: other attention backends' workspaces that FULL captures touch
    (``profile_seq_lens``), FlashInfer's per-size decode wrappers in the second FULL sample,
    vLLM's estimate exceeding the pool by far in some
    setups (#45178, #53013), and whether the first graph's 70 MiB recurs when vLLM captures
    again after its estimate.
    """
    modes = {m: v for m, v in (sizes or engine_graph_modes(ctx)).items() if v}
    if not modes:
        return GraphModel(modes={}, first_capture={}, per_graph_sample={}, estimate=0, actual=0,
                          driver=0, graphs=0)
    kept = engine_of(ctx.dep).graph_kept_logits(ctx.dep, modes["FULL"], ctx.spec.vocab_size) \
        if (list(modes) == ["FULL"]
            and engine_of(ctx.dep).decode_graph_sizes(ctx.dep, ctx.gpu) is not None) else None
    if kept is not None:
        return _engine_graph_model(ctx, modes["FULL"], kept)
    # each mode's live sets and per-size driver bytes read once (graph_pool_tensor_bytes and
    # graph_driver_bytes, which give the same figures mode by mode)
    stages: dict[str, tuple[tuple[int, ...], ...]] = {
        m: _mode_stages(ctx, m, max(modes[m])) for m in ("PIECEWISE", "FULL") if m in modes}
    workspace = cublas_workspace_bytes(ctx.gpu)
    # the pool holds every size's capture; the samples hold their own size's (``_pool_stages``)
    tensors = _pool_reserved(tuple(st for m in stages
                                   for st in _pool_stages(ctx, m, modes[m], stages[m]))) + workspace
    per_size = {m: _driver_per_size(ctx, m) for m in modes}
    first_graph = graph_driver_first(ctx)
    # --enable-lora: each size captured once per LoRA case, those without LoRA lacking the
    # LoRA linears' kernel nodes (terms/lora.py LORA_GRAPH_CASES)
    with_lora, without = lora_capture_cases(ctx)
    cases = with_lora + without
    idle = (lora_graph_nodes(ctx) - lora_graph_nodes(ctx, active=False)) * node_costs(ctx)[1] \
        if without else 0
    driver = first_graph + sum(len(v) * (cases * per_size[m] - without * idle)
                               for m, v in modes.items())
    pieces = graph_pieces(ctx) + drafter_graph_nodes(ctx)[0]  # the V1 drafter's at each size
    graphs = cases * sum(len(v) * (pieces if m == "PIECEWISE" else 1) for m, v in modes.items())
    first: dict[str, int] = {}
    per_graph: dict[str, int] = {}
    # FlashInfer's workspace, made by the first metadata build: V1 builds attention metadata only
    # for the FULL mode, in its first sample (attn_capture.estimate_window_workspace)
    fi_workspace = estimate_window_workspace(ctx)[0] if "FULL" in modes else 0
    for i, m in enumerate(modes):
        own = _pool_reserved(stages.get(m, ())) + workspace
        first[m] = (own + per_size[m] + (first_graph if i == 0 else 0)
                    + (fi_workspace if m == "FULL" else 0))
        per_graph[m] = max(per_size[m], CUDAGRAPH_MIN_PER_GRAPH)
    estimate = (max(first.values())
                + sum(per_graph[m] * (cases * len(v) - 1) for m, v in modes.items()))
    return GraphModel(modes=modes, first_capture=first, per_graph_sample=per_graph,
                      estimate=estimate, actual=tensors + driver, driver=driver, graphs=graphs)


def engine_graph_modes(ctx: TermContext) -> dict[str, list[int]]:
    """The graphs of each capture size: an engine's own decode graphs where it captures its
    own list (``Engine.decode_graph_sizes``: one graph of the whole forward per batch size, as
    FULL), else vLLM's by release (``graph_modes``), with Model Runner V2's own FULL decode
    sizes where it runs (``v2_full_decode_sizes``)."""
    sizes = engine_of(ctx.dep).decode_graph_sizes(ctx.dep, ctx.gpu)
    if sizes is not None:
        return {"FULL": sizes}
    modes = graph_modes(ctx.dep, ctx.spec.architecture)
    if "FULL" in modes and "PIECEWISE" in modes and runs_v2(ctx):
        modes["FULL"] = v2_full_decode_sizes(ctx.dep, modes["PIECEWISE"])
    return modes


# What torch's CUDA generator allocates when a first CUDA graph registers with it: two int64 [1]
# tensors, seed_extragraph_ and offset_extragraph_ (aten/src/ATen/cuda/CUDAGeneratorImpl.cpp
# ``CUDAGeneratorState::register_graph``, called by CUDAGraph::capture_begin before the capture
# begins: "Cannot register the state during capturing stage"; older releases make the same two
# in CUDAGraph::capture_begin for every graph), on the current stream, in the ordinary pool, kept
# while a graph is registered: two 512-B small blocks, one 2 MiB small segment on the capture
# stream. Measured: reports/gpu/sglang-trace-graphs/sglang-trace-graphs-h200-inputs.json
# (``side_stream_blocks``: two active blocks of 8 requested bytes in that segment, every case).
GENERATOR_GRAPH_STATE: tuple[int, ...] = (8, 8)


def _engine_graph_model(ctx: TermContext, sizes: list[int],
                        kept: tuple[tuple[int, ...], int, str]) -> GraphModel:
    """An engine's own decode graphs (SGLang's ``CudaGraphRunner``): one graph of the whole
    forward per batch size, captured in ``sizes``' order into one private pool, with nothing
    of the engine's own to subtract from a budget (``estimate`` = ``actual``)::

        tensors = the pool after the largest size's decode live set, with the logits each graph
                  keeps (``Engine.graph_kept_logits``; a pipeline stage before the last: its
                  hidden states and residual, ``Engine.graph_stage_outputs``), + the runner's
                  input buffers (``Engine.graph_input_buffers``) and a logits buffer allocated
                  before the capture, + the capture stream's cuBLAS workspace and, for the
                  process's first graph, torch's generator state (``GENERATOR_GRAPH_STATE``),
                  + the attention backend's
                  capture state outside the pool (``Engine.graph_capture_state``), these three
                  in the segments their streams reserve (``Engine.graph_capture_reserved``:
                  the runner's stream and the capture stream share none); captured after
                  other graphs into the same
                  pool (``Engine.graph_after_earlier_capture``) on the same stream, no live
                  set of its own (on a stream of its own the live set as when captured first:
                  the allocator reuses a free block only on its own stream), and the logits
                  buffer and workspace only where the earlier capture did not make them
        driver  = the first graph's stream pool (``graph_driver_first``) + per size the graph,
                  its kernel nodes and NCCL nodes as vLLM's FULL graphs cost them

    The smaller sizes' live sets reuse the largest one's free blocks (approximation, as
    ``graph_pool_tensor_bytes``)."""
    logits_kept, before, what = kept
    in_pool: tuple[tuple[int, ...], ...] = tuple((b,) for b in logits_kept)
    if not is_last_stage(ctx):  # no logits made on this stage: its graphs keep their outputs
        outputs = engine_of(ctx.dep).graph_stage_outputs(ctx.dep, sizes, ctx.spec.hidden_size,
                                                         model_bytes(ctx))
        if outputs is not None:
            in_pool, stage_words = outputs
            what = stage_words + (f"; {what}" if before else "")
    after = engine_of(ctx.dep).graph_after_earlier_capture(ctx.dep, ctx.gpu, ctx.spec)
    if after is not None:
        what = after[2] if after[0] else f"{after[2]}; {what}"
        before = 0 if after[0] else before
    if after is not None and after[1]:  # the live sets fit the earlier capture's freed blocks
        tensors = sum(_segment_bytes(b) for graph in in_pool for b in graph)
    else:  # captured first, or on a stream of its own: torch's caching allocator hands a free
        # block only to an allocation on the stream it was made on (c10/cuda/
        # CUDACachingAllocator.cpp get_free_block: ``(*it)->stream != p.stream()`` -> no
        # block), so an earlier capture's freed blocks on another stream hold none of these
        what = (f"the largest size's decode live set, {what}" if after is None else
                f"{what}; the largest size's decode live set")
        # the logits processor runs on the last pipeline stage only (SGLang 0.5.10
        # models/qwen3.py, qwen2.py, llama.py ``forward``: ``if self.pp_group.is_last_rank``
        # calls ``logits_processor``, the other stages return their PPProxyTensors)
        logits, words = engine_of(ctx.dep).graph_lm_head_stages(
            ctx.dep, ctx.spec.vocab_size, ctx.spec.hidden_size, max(sizes),
            model_bytes(ctx)) if is_last_stage(ctx) else ((), "")
        what += f", {words} in it" if words else ""
        stages = _mode_stages(ctx, "FULL", max(sizes)) + logits
        largest = sizes.index(max(sizes))
        tensors = (_pool_reserved_keeping(stages, in_pool, largest) if in_pool
                   else _pool_reserved(stages))
    first: tuple[int, ...] = ()
    if after is None or not after[1]:
        what += ", the capture stream's cuBLAS workspace"
        first = (cublas_workspace_bytes(ctx.gpu),)
    if after is None:  # the process's first graph: the generator registers it on this stream
        what += " and torch's CUDA generator's graph state (2 × int64 [1])"
        first += GENERATOR_GRAPH_STATE
    engine = engine_of(ctx.dep)
    state = engine.graph_capture_state(ctx.dep, ctx.gpu, ctx.spec, sizes)
    inputs, input_words = engine.graph_input_buffers(ctx.dep, max(sizes), ctx.spec.hidden_size,
                                                     ctx.model_dtype)
    what += f", {input_words}" if input_words else ""
    # the state, the input buffers, the logits buffer and the workspace in the segments each
    # stream reserves
    outside = engine.graph_capture_reserved(ctx.dep, ctx.gpu, ctx.spec, sizes,
                                            (*inputs, before), first)
    if outside is None:
        outside = (sum(_segment_bytes(b) for b in (*first, *inputs, before) if b)
                   + (state[0] if state else 0))
    pool = tensors
    tensors += outside
    driver = graph_driver_first(ctx) + len(sizes) * _driver_per_size(ctx, "FULL")
    actual = tensors + driver
    return GraphModel(modes={"FULL": sizes}, first_capture={"FULL": actual},
                      per_graph_sample={"FULL": _driver_per_size(ctx, "FULL")},
                      estimate=actual, actual=actual, driver=driver, graphs=len(sizes),
                      kept=what, state=state[1] if state else "", pool=pool)


def _segment_bytes(nbytes: int) -> int:
    """The segment the caching allocator reserves for one allocation of ``nbytes``."""
    from memprof.alloc.allocator import get_allocation_size
    from memprof.alloc.constants import K_MIN_BLOCK_SIZE

    return int(get_allocation_size(K_MIN_BLOCK_SIZE * -(-nbytes // K_MIN_BLOCK_SIZE)))


@lru_cache(maxsize=256)
def _pool_reserved_keeping(stages: tuple[tuple[int, ...], ...],
                           kept: tuple[tuple[int, ...], ...], largest: int) -> int:
    """Reserved bytes of a private pool into which graphs are captured in turn, each keeping
    its tensors (``kept``, per graph in capture order): the graph at ``largest`` allocates and
    frees the decode live sets ``stages`` and makes its kept tensors in the last of them; the
    others add their kept tensors alone (their live sets fit the blocks the largest one freed).
    ``memprof.alloc``'s replica of the caching allocator, one private pool on one stream."""
    from memprof.alloc.allocator import CachingAllocator

    alloc = CachingAllocator()
    alloc.begin_capture(1, stream=1)
    for i, graph in enumerate(kept):
        if i != largest:
            for nbytes in graph:
                alloc.malloc(nbytes, stream=1)
            continue
        for j, stage in enumerate(stages):
            held = [alloc.malloc(b, stream=1) for b in stage]
            if j == len(stages) - 1:
                for nbytes in graph:
                    alloc.malloc(nbytes, stream=1)
            for h in held:
                alloc.free(h)
    alloc.end_capture()
    return alloc.total_allocated_memory


# Whether vLLM subtracts a CUDA-graph estimate from the KV budget: "none" (no estimate; graphs
# are captured after the KV cache is sized), "off" (estimated and logged, not subtracted:
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 0), "on" (subtracted; default 1).
# The 0.20.0 log line says "default since v0.21.0", but the 0.20.0 wheel already defaults it on.
CUDAGRAPH_ESTIMATE: tuple[Rule, ...] = (
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.6.0",
         until="0.18.0", value="none", introduced_by="before 0.6.0",
         removed_by="profile_cudagraph_memory (first released in 0.18.0)",
         source="0.17.0 v1/worker/gpu_worker.py determine_available_memory (no CUDA-graph "
         "term); 0.6.0, 0.6.4.post1, 0.6.6.post1 and 0.7.2 worker/worker.py "
         "determine_num_available_blocks (V0: weights + activation peak + non-torch only)"),
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.18.0",
         until="0.20.0", value="off",
         introduced_by="profile_cudagraph_memory (first released in 0.18.0)",
         removed_by="#38284 (default on, first released in 0.20.0)",
         source="0.18.0 / 0.19.1 envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '0'; "
         "v1/worker/gpu_worker.py determine_available_memory: "
         "cudagraph_memory_estimate_applied = 0 unless the flag is set"),
    Rule(name="cudagraph_estimate_in_budget", changes="CUDA-graph estimate", since="0.20.0",
         until=None, value="on", introduced_by="#38284 (first released in 0.20.0)",
         source="0.20.0 / 0.33.0 envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default '1'; "
         "v1/worker/gpu_worker.py determine_available_memory subtracts it"),
)


def cudagraph_terms(ctx: TermContext) -> list[Component]:
    """Two components (category "cudagraph"):

    - "CUDA-graph estimate": vLLM's own estimate (``cudagraph_model``), which it subtracts from
      the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, the default from 0.20.0,
      #38284; before 0.20.0 nothing is subtracted: ``cudagraph_terms_estimate_off``, rows in
      ``CUDAGRAPH_ESTIMATE``): where "budget", profiled;
    - "CUDA-graph pool above the estimate": max(0, actual − estimate), where "runtime", not
      profiled.

    ``--enforce-eager`` captures nothing: both are 0 with formula "enforce_eager". Where Model
    Runner V2 estimates its own graphs (0.29.0 on: ``runner_v2_profile.v2_estimates_graphs``)
    none: ``memprof.core.terms.runner_v2_graphs`` gives both components.
    """
    names = ("CUDA-graph estimate", "CUDA-graph pool above the estimate")
    if (not ctx.dep.enforce_eager and engine_of(ctx.dep).graph_estimate_by_release
            and value_at(CUDAGRAPH_ESTIMATE, ctx.dep.engine_version, "on") != "on"):
        return cudagraph_terms_estimate_off(ctx)
    if v2_estimates_graphs(ctx):
        # Model Runner V2 from 0.29.0 charges its own estimate (terms/runner_v2_graphs.py)
        return []
    if not ctx.dep.enforce_eager and v2_estimates_nothing(ctx):
        # Model Runner V2 before 0.29.0 estimates nothing (terms/runner_v2_profile.py)
        return cudagraph_terms_estimate_off(
            ctx, why=f"Model Runner V2 at vLLM {ctx.dep.engine_version} estimates nothing: "
            "profile_cudagraph_memory returns 0")
    if ctx.dep.enforce_eager:
        return [Component(name=names[0], category="cudagraph", bytes=0, where="budget",
                          profiled=True, formula="enforce_eager"),
                Component(name=names[1], category="cudagraph", bytes=0, where="runtime",
                          profiled=False, formula="enforce_eager"),
                *prefill_graph_terms(ctx, decode_rows=0)]
    g = cudagraph_model(ctx)
    if g.kept:
        pool = stream_pool_outside_graphs(ctx)
        return [*_engine_graph_terms(ctx, g, names), *([pool] if pool else []),
                *prefill_graph_terms(ctx, decode_rows=max(g.modes["FULL"]))]
    counts = ", ".join(f"{m}={len(s)} (largest={max(s)})" for m, s in g.modes.items())
    firsts = " / ".join(f"{m} {fmt_bytes(b)}" for m, b in g.first_capture.items())
    samples = " / ".join(f"{m} {fmt_bytes(b)}" for m, b in g.per_graph_sample.items())
    n = sum(len(s) for s in g.modes.values())
    return [
        Component(name=names[0], category="cudagraph", bytes=g.estimate, count=max(1, n),
                  where="budget", profiled=True,
                  formula=f"{counts}; max first capture ({firsts}) + per size ({samples}) "
                  "× (n−1) per mode"),
        Component(name=names[1], category="cudagraph", bytes=max(0, g.actual - g.estimate),
                  where="runtime", profiled=False,
                  formula=f"predicted capture {fmt_bytes(g.actual)} (pool tensors "
                  f"{fmt_bytes(g.actual - g.driver)} + driver {fmt_bytes(g.driver)} for "
                  f"{g.graphs} graphs{_stack_note(ctx, g)}) − estimate"),
    ]


def _engine_graph_terms(ctx: TermContext, g: GraphModel,
                        names: tuple[str, str]) -> list[Component]:
    """The components of an engine's own decode graphs (``_engine_graph_model``): the whole
    capture in the first, where the engine's budget places graphs; nothing above it."""
    sizes = g.modes["FULL"]
    shown = ", ".join(map(str, sizes[:6])) + (", …" if len(sizes) > 6 else "")
    return [
        Component(name=names[0], category="cudagraph", bytes=g.actual, count=g.graphs,
                  where="budget", profiled=True,
                  formula=f"{g.graphs} decode graphs, batch sizes {shown} in capture order "
                  f"(largest {max(sizes)}), one of the whole forward each: pool tensors "
                  f"{fmt_bytes(g.actual - g.driver)} ({g.kept}) + driver "
                  f"{fmt_bytes(g.driver)}{_stack_note(ctx, g)}; "
                  f"{g.state or 'the attention backend capture state not modelled [assumption]'}"),
        Component(name=names[1], category="cudagraph", bytes=0, where="runtime",
                  profiled=False,
                  formula="none: the component above is the whole capture (the engine has no "
                  "estimate of its own)"),
    ]


PREFILL_GRAPHS = "prefill CUDA graphs"


def prefill_graph_terms(ctx: TermContext, decode_rows: int) -> list[Component]:
    """An engine's own prefill CUDA graphs, where it captures them
    (``Engine.prefill_graph_tokens``; SGLang from 0.5.10): one component, where "runtime",
    the figure SGLang logs as "Capture piecewise CUDA graph end … mem usage" (0.5.14 on:
    "Capture target prefill CUDA graph end"). They are captured per token count as vLLM's
    PIECEWISE graphs are (the forward split at each attention, one graph a piece), so memprof
    predicts them as vLLM's piecewise capture of those sizes (``cudagraph_model``: the largest
    size's live sets in the pool + driver memory per graph and node)
    [approximation: SGLang's tc_piecewise / breakable backends split where vLLM's does]; plus,
    where the decode graphs share one logits buffer allocated by the first runner that asks
    (``Engine.prefill_graph_logits``), that fp32 [decode rows, vocab] buffer."""
    engine = engine_of(ctx.dep)
    tokens = engine.prefill_graph_tokens(ctx.dep, ctx.gpu, ctx.spec)
    if not tokens:
        return []
    g = cudagraph_model(ctx, {"PIECEWISE": tokens})
    logits = (_segment_bytes(decode_rows * ctx.spec.vocab_size * 4)
              if decode_rows and engine.prefill_graph_logits(ctx.dep) else 0)
    shown = f" + the shared fp32 logits buffer [{decode_rows}, {ctx.spec.vocab_size:,}]" \
        if logits else ""
    return [Component(name=PREFILL_GRAPHS, category="cudagraph", bytes=g.actual + logits,
                      count=len(tokens), where="runtime", profiled=False,
                      formula=f"{len(tokens)} prefill sizes up to {max(tokens):,} tokens, each "
                      f"captured piecewise ({g.graphs} graphs): pool tensors "
                      f"{fmt_bytes(g.actual - g.driver)} + driver {fmt_bytes(g.driver)}"
                      f"{shown}, as vLLM's PIECEWISE capture of those sizes "
                      "[approximation]")]


def cudagraph_terms_estimate_off(ctx: TermContext, why: str = "") -> list[Component]:
    """vLLM before 0.20.0 (#38284; or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0), or Model
    Runner V2 before 0.29.0 (``why`` says so): nothing is subtracted from the budget and the
    whole pool appears at run time. Before 0.18.0 vLLM had no estimate at all; the pool is
    memprof's V1 prediction (V0's capture sizes differ: approximation)."""
    if ctx.dep.enforce_eager:
        return [Component(name="CUDA-graph estimate", category="cudagraph", bytes=0,
                          where="budget", profiled=True, formula="enforce_eager"),
                Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                          bytes=0, where="runtime", profiled=False, formula="enforce_eager")]
    g = cudagraph_model(ctx)
    why = why or {"none": f"vLLM {ctx.dep.engine_version} has no CUDA-graph estimate",
                  "off": f"vLLM {ctx.dep.engine_version} estimates but does not subtract "
                  "it"}.get(str(value_at(CUDAGRAPH_ESTIMATE, ctx.dep.engine_version, "on")),
                            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0")
    return [Component(name="CUDA-graph estimate", category="cudagraph", bytes=0, where="budget",
                      profiled=True, formula=f"nothing subtracted ({why})"),
            Component(name="CUDA-graph pool above the estimate", category="cudagraph",
                      bytes=g.actual, where="runtime", profiled=False,
                      formula=f"predicted pool {fmt_bytes(g.actual)}, none of it budgeted"
                      f"{_stack_note(ctx, g)}")]


def _stack_note(ctx: TermContext, g: GraphModel) -> str:
    """What the formula says of the driver stack, of graphs charged NCCL's NET cost and of NCCL
    nodes spared the graph-mixing share (``nccl_mixing_nodes``)."""
    notes = [driver_stack_note(ctx)]
    drafter = drafter_graph_note(ctx)
    if drafter:
        own = drafter_graph_nodes(ctx)[0] * len(g.modes.get("PIECEWISE", ()))
        notes.append(f"the speculative drafter's CUDA graphs: {drafter}"
                     + (f" ({own} of the graphs)" if own else ""))
    net = sum(len(v) * graph_net_graphs(ctx, m) for m, v in g.modes.items())
    if net:
        notes.append(f"{net} graphs holding a TP all-reduce over NCCL's NET transport (TP "
                     f"across hosts) at {fmt_bytes(GRAPH_DRIVER_NET_PER_GRAPH)} more each")
    spared = sum(len(v) * (graph_nccl_nodes(ctx) - nccl_mixing_nodes(ctx, m))
                 for m, v in g.modes.items())
    if spared:
        notes.append(f"{spared} NCCL nodes past their graph's second without NCCL's graph-mixing "
                     f"{fmt_bytes(GRAPH_DRIVER_NCCL_MIXING)}: this release's NCCL adds its "
                     "event-record node as a leaf (NCCL_RECORD_PLACEMENT, measured on H100 / "
                     "driver 580)")
    elif graph_nccl_nodes(ctx) and ctx.gpu.is_rocm:
        notes.append("RCCL's graph-mixing record node taken in line, as NCCL's measured one "
                     "[assumption]")
    return "".join(f"; {n}" for n in notes if n)
