"""Validate SGLang's DP-attention gather buffer (seed 002): per forward vs persistent.

For one deployment (SGLang, ``--enable-dp-attention``, ``--dp``, ``--cuda-graph-max-bs``) it runs
the gather → MLP → scatter of ``dp_gather`` once per policy and reports: parity (every DP rank's
rows after the MLP against ``local × weight``), the buffer's bytes each way beside the estimate's
``SGLang DP-attention gathered buffer`` component for the same deployment, and the graph-clean
check (``graph_clean``: on CUDA the forward, NCCL all-gather included, captured in one CUDA graph
and replayed with new tokens; the graph pool each policy leaves). Persistent must be clean; per
forward is shown not clean (the buffer lands in the graph pool and moves between captured and
eager forwards).
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from memprof.base.errors import BadInput
from memprof.core.deployment import Deployment
from memprof.core.models import load_model
from memprof.kernels.dp_gather import (
    CATALOG_POLICY,
    POLICIES,
    DPGatherBuffer,
    dp_gather_forward,
    process_group,
)
from memprof.validation.checks import MAX_SHARED_RATIO, GraphClean
from memprof.validation.dp_gather_result import VALIDATION, DPGatherValidation, DPPolicyRun
from memprof.validation.graph_clean import CudaGraphRecorder, SimulatedRecorder, check_graph_clean
from memprof.validation.mla_tq import (
    _alternate_steps,
    _cuda_mem,
    _parity,
)
from memprof.validation.registry import Request, prepare

CATALOG_NAME = "SGLang DP-attention gathered buffer"


def _estimate(model: str, dep: Deployment, gpu_name: str, notes: list[str]) -> int | None:
    from memprof.core.estimate import estimate  # the estimator imports no torch

    try:
        est = estimate(model, dep, gpu_name=gpu_name)
    except Exception as e:  # an estimate that cannot run proves nothing: the check fails
        notes.append(f"estimate({model}, sglang dp {dep.dp}, {dep.scratch}) failed: {e}")
        return None
    return sum(c.bytes for c in est.ranks[0].components if c.name.startswith(CATALOG_NAME))


def validate_dp_gather(*, model: str = "deepseek-r1", tp: int = 8, dp: int = 8,
                       max_bs: int = 64, speculative_tokens: int = 0, device: str = "cpu",
                       gpu_name: str = "H200", policies: tuple[str, ...] = POLICIES,
                       graph_steps: int | None = None, reps: int = 10, rounds: int = 3,
                       check_graph: bool = True, seed: int = 0) -> DPGatherValidation:
    """The gathered buffer of SGLang DP attention on ``model`` (``--tp tp --dp dp
    --enable-dp-attention --cuda-graph-max-bs max_bs``); this process stands for ``dp / world``
    DP ranks of whatever process group exists (a world of one otherwise)."""
    dev = torch.device(device)
    on_cuda = dev.type == "cuda"
    spec = load_model(model)
    hidden = spec.hidden_size
    dtype = torch.bfloat16  # the model dtype of every bundled DP-attention model
    tpb = 1 + speculative_tokens
    notes: list[str] = []
    with process_group(dev):
        world, rank = dist.get_world_size(), dist.get_rank()
        backend = str(dist.get_backend())
        if dp % world:
            raise ValueError(f"--dp {dp} is not a multiple of the world size {world}")
        V, R = dp // world, max_bs * tpb
        rows = world * V * R
        gen = torch.Generator().manual_seed(seed + rank)
        weight = (torch.rand((hidden,), generator=gen) + 0.5).to(dtype).to(dev)
        local = torch.zeros((V, R, hidden), dtype=dtype, device=dev)  # captured input
        out = torch.zeros((V, R, hidden), dtype=dtype, device=dev)

        def make_input() -> torch.Tensor:
            x = torch.randn((V, R, hidden), generator=gen).to(dtype)
            n = torch.randint(0, R + 1, (V,), generator=gen)  # uneven tokens per DP rank
            x[torch.arange(R)[None, :] >= n[:, None]] = 0  # MAX_LEN padding
            return x.to(dev)

        first = make_input()
        local.copy_(first)
        runs: list[DPPolicyRun] = []
        live: dict[str, DPGatherBuffer] = {}
        for pol in policies:
            a0 = _cuda_mem(dev)[0] if on_cuda else 0
            holder = DPGatherBuffer(pol, rows, hidden, dtype=dtype, device=dev)
            n0, b0 = holder.counter()
            dp_gather_forward(local, holder, weight, out)
            per_fwd = holder.counter()[1] - b0
            a_d = _cuda_mem(dev)[0] - a0 if on_cuda else None
            ref = local.float() * weight.float()
            parity = [_parity(f"{V} DP rank(s) of this process after gather → MLP → scatter",
                              out, ref, 1e-2)]
            est = _estimate(model, Deployment(engine="sglang", tp=tp, dp=dp,
                                              enable_dp_attention=True,
                                              cuda_graph_max_bs=max_bs,
                                              num_speculative_tokens=speculative_tokens,
                                              scratch=CATALOG_POLICY[pol]), gpu_name, notes)
            measured = holder.nbytes
            runs.append(DPPolicyRun(
                policy=pol, catalog_policy=CATALOG_POLICY[pol], buffer_bytes=measured,
                held_bytes=holder.held_bytes, allocated_per_forward_bytes=per_fwd,
                estimate_bytes=est, estimate_match=None if est is None else est == measured,
                allocated_delta_bytes=a_d, step_ms=None, parity=tuple(parity), graph=None))
            live[pol] = holder
            del n0

        inputs: list[torch.Tensor] = [first]

        def step(h: DPGatherBuffer) -> None:
            dp_gather_forward(local, h, weight, out)

        def set_input(j: int) -> None:
            local.copy_(inputs[j])

        graphs: dict[str, GraphClean] = {}
        if check_graph:
            steps = graph_steps if graph_steps is not None else (100 if on_cuda else 3)
            inputs[:] = [first] + [make_input() for _ in range(steps)]
            for pol, h in live.items():
                rec: CudaGraphRecorder | SimulatedRecorder
                rec = CudaGraphRecorder(dev) if on_cuda else SimulatedRecorder(h.counter)

                def tracked(h: DPGatherBuffer = h) -> dict[str, int]:
                    return {**h.tracked(), "local": local.data_ptr(), "out": out.data_ptr()}

                graphs[pol] = check_graph_clean(
                    rec, functools.partial(step, h),
                    set_input, [out], tracked, steps)
                rec.release()
            if not on_cuda:
                notes.append("graph-clean on the CPU: simulated (gloo collectives cannot be "
                             "captured; the forward re-run eagerly, allocations counted by the "
                             "buffer owner); CUDA graph capture and pool size are CUDA-only")
        ratio = speed_ok = None
        times: dict[str, float] = {}
        if on_cuda:
            times = _alternate_steps({p: functools.partial(step, h) for p, h in live.items()},
                                     dev, reps, rounds)
            if "per-forward" in times and "persistent" in times:
                ratio = times["persistent"] / times["per-forward"]
                speed_ok = ratio <= MAX_SHARED_RATIO
        runs = [DPPolicyRun(**{**{f: getattr(r, f) for f in r.__dataclass_fields__},
                               "graph": graphs.get(r.policy), "step_ms": times.get(r.policy)})
                for r in runs]
        for h in live.values():
            h.release()
    if world == 1:
        notes.append(f"a world of one ({backend}) standing for all {dp} DP ranks: the gather "
                     "moves no bytes between GPUs; several GPUs over NCCL are the multi-GPU "
                     "issue's")
    return DPGatherValidation(
        kernel="dp_gather", model=spec.name, device=str(dev), backend=backend,
        world_size=world, dp=dp, max_bs=max_bs, tokens_per_bs=tpb, hidden=hidden, rows=rows,
        dtype="bfloat16", runs=tuple(runs), persistent_over_per_forward=ratio,
        speed_passed=speed_ok, notes=tuple(notes))


# --- the run of the row (memprof/validation/dp_gather_result.py) --------------------------------

DEFAULT_DP = 8  # --dp of seed 002


def run(req: Request) -> DPGatherValidation:
    p = prepare(VALIDATION, req)
    dp = req.dp or DEFAULT_DP
    if p.tp % dp:
        raise BadInput(f"SGLang DP attention needs --dp ({dp}) to divide the TP size ({p.tp})",
                       hint="use a --dp that divides -tp")
    return validate_dp_gather(model=p.model, tp=p.tp, dp=dp, max_bs=p.batch, device=req.device,
                              gpu_name=p.gpu, graph_steps=req.graph_steps, reps=req.steps,
                              seed=req.seed)
