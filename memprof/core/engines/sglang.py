"""SGLang as an engine: one server of ``--tp`` GPUs (``--dp`` splits it for attention), the budget
``mem_fraction_static × free before load``, its chunked-prefill, CUDA-graph batch and
``mem_fraction_static`` heuristics, ``--page-size`` taken as given.

Budget line (SGL@d315eb7 kv_cache_configurator.py)::

    KV = mem_fraction_static × free before loading − what loading took
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from memprof.base.errors import BadInput, LayoutError
from memprof.base.units import GiB, MiB
from memprof.core import releases
from memprof.core.engines.base import (
    Budget,
    C,
    ComponentView,
    DeploymentView,
    Engine,
    RankCoord,
    loaded_at_start,
)
from memprof.core.engines.vllm import batch_defaults
from memprof.core.gpus import GPU
from memprof.core.models.config import first_length_key_max_len

# SGLang: --chunked-prefill-size -1 (or 0) turns chunked prefill off; the prefill then runs up to
# --max-prefill-tokens, default 16384 (python/sglang/srt/server_args.py, SGL@d315eb7,
# ``max_prefill_tokens: int = 16384`` and ``_handle_gpu_memory_settings``).
SGLANG_MAX_PREFILL_TOKENS = 16384
# the scratch catalog's key of the --enable-dp-attention gathered buffer (scratch/sglang_dp.py)
DP_ATTENTION_SCRATCH = "sglang_dp_attention"


def sglang_defaults(gpu: GPU, dep: DeploymentView) -> tuple[int, int, float]:
    """SGLang's (chunked_prefill_size, cuda_graph_max_bs, mem_fraction_static) heuristics.

    ``server_args.py::_handle_gpu_memory_settings`` (SGL@d315eb7), sizes in MiB::

        reserved = 512 + 1.5·max(chunked_prefill_size, 2048) + tp·pp/8·1024 + reserve_for_graph
        reserve_for_graph = 2·max_bs [+ 3·max_bs·dp (+1.5·max_bs·dp if max_bs > 300) with DP attn]
        reserved = max(reserved, 10 GiB) if the GPU has more than 60 GiB
        mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3)
    """
    gib = gpu.total_bytes / GiB
    tiers = ((20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (90, 8192, 256, 512),
             (160, 8192, 256, 512), (math.inf, 16384, 512, 512))
    tier = next(t for t in tiers if gib < t[0])
    chunk = tier[1] if dep.chunked_prefill_size is None else dep.chunked_prefill_size
    max_bs = dep.cuda_graph_max_bs or (tier[2] if dep.tp < 4 else tier[3])
    graph: float = 2 * max_bs
    if dep.enable_dp_attention:
        graph += 3 * max_bs * dep.dp + (1.5 * max_bs * dep.dp if max_bs > 300 else 0)
    mib = gpu.total_bytes / MiB
    # chunked prefill off (-1): the reserve follows --max-prefill-tokens instead
    prefill = chunk if chunk > 0 else SGLANG_MAX_PREFILL_TOKENS
    reserved = 512 + 1.5 * max(prefill, 2048) + dep.tp * dep.pp / 8 * 1024 + graph
    if gib > 60:
        reserved = max(reserved, 10 * 1024)
    if dep.mem_fraction_static:
        return chunk, max_bs, dep.mem_fraction_static
    mfs = round((mib - reserved) / mib, 3)
    if mfs <= 0 and dep.engine == SGLang.name:
        # (a vLLM deployment reads only the graph batch of these; its budget is its own)
        # SGLang would start with a mem_fraction_static ≤ 0 and fail: refuse the settings instead
        fixed = reserved - graph
        per_bs = graph / max_bs
        top = max(1, int((mib * 0.999 - fixed) / per_bs)) if per_bs else 0
        raise BadInput(
            f"with --cuda-graph-max-bs {max_bs} SGLang's mem_fraction_static heuristic reserves "
            f"{reserved:,.0f} MiB for activations and CUDA graphs, more than the GPU's "
            f"{mib:,.0f} MiB (mem_fraction_static would be {mfs})",
            hint=f"lower --cuda-graph-max-bs (at most {top} here), or set --mem-fraction-static")
    return chunk, max_bs, mfs


class SGLang(Engine):
    """SGLang (``python -m sglang.launch_server``) at the snapshots of its row in
    ``releases.py``."""

    name: ClassVar[str] = "sglang"
    display: ClassVar[str] = releases.SGLANG.display
    # SGLang get_bool_env_var("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") (model_config.py)
    long_context_env: ClassVar[str] = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
    overrides_flag: ClassVar[str] = "--json-model-override-args"
    own_rope_buffers: ClassVar[bool] = True
    launcher_prefix: ClassVar[str] = "python -m sglang.launch_server "
    # ServerArgs.add_cli_args (python/sglang/srt/server_args.py, SGL@d315eb7); --engine,
    # --engine-version and --scratch are memprof's own
    flags: ClassVar[dict[str, tuple[str, ...]]] = {
        "engine": ("--engine",),
        "engine_version": ("--engine-version",),
        "tp": ("--tp", "--tp-size"),
        "pp": ("--pp-size",),
        "dp": ("--dp", "--dp-size"),
        "enable_expert_parallel": ("--enable-expert-parallel",),
        "dtype": ("--dtype",),
        "hf_overrides": ("--json-model-override-args",),
        "quantization": ("--quantization",),
        "kv_cache_dtype": ("--kv-cache-dtype",),
        "max_model_len": ("--context-length",),
        "max_num_seqs": ("--max-running-requests",),
        "block_size": ("--page-size",),
        "enforce_eager": ("--disable-cuda-graph",),
        "scratch": ("--scratch",),
        "disable_custom_all_reduce": ("--disable-custom-all-reduce",),
        "assume_architecture": ("--assume-architecture",),
        "mem_fraction_static": ("--mem-fraction-static",),
        "enable_dp_attention": ("--enable-dp-attention",),
        "chunked_prefill_size": ("--chunked-prefill-size",),
        "cuda_graph_max_bs": ("--cuda-graph-max-bs",),
    }

    # --- rank layout: one server of --tp GPUs; --dp splits it for attention --------------------

    def world_size(self, dep: DeploymentView) -> int:
        """``--tp`` is the GPU count of one server and ``--dp`` splits it for attention: TP×PP."""
        return dep.tp * dep.pp

    def attn_tp(self, dep: DeploymentView) -> int:
        """``--enable-dp-attention`` runs attention with ``tp / dp`` ranks per DP group
        (``python/sglang/srt/layers/dp_attention.py``)."""
        if dep.enable_dp_attention:
            return max(1, dep.tp // dep.dp)
        return dep.tp

    def copies(self, dep: DeploymentView) -> int:
        return 1

    def ep_size(self, dep: DeploymentView) -> int:
        """Experts over the TP ranks of the one server with --enable-expert-parallel."""
        return dep.tp if dep.enable_expert_parallel else 1

    def moe_tp_size(self, dep: DeploymentView) -> int:
        return 1 if dep.enable_expert_parallel else dep.tp

    def rank_coords(self, dep: DeploymentView) -> list[RankCoord]:
        out = []
        for pp_stage in range(dep.pp):
            for tp_rank in range(dep.tp):
                dp_rank = tp_rank // dep.attn_tp if dep.enable_dp_attention else 0
                ep = tp_rank if dep.enable_expert_parallel else None
                out.append(RankCoord(pp_stage * dep.tp + tp_rank, tp_rank, pp_stage, dp_rank, ep))
        return out

    # --- defaults -----------------------------------------------------------------------------

    def batch_defaults(self, gpu: GPU, version: str | None, entrypoint: str,
                       max_model_len: int, v0_chunked_prefill: bool = True) -> tuple[int, int]:
        """vLLM's newest defaults (the sequences cap stands in for --max-running-requests)."""
        return batch_defaults(gpu, None, entrypoint, max_model_len, v0_chunked_prefill)

    def prepared(self, dep: DeploymentView, gpu: GPU) -> dict[str, object]:
        """The heuristics' chunked prefill and graph batch; prefill tokens from the chunk (or
        --max-prefill-tokens with chunking off); ``--page-size`` 1 when left out."""
        chunk, max_bs, _mfs = sglang_defaults(gpu, dep)
        prefill = chunk if chunk > 0 else SGLANG_MAX_PREFILL_TOKENS
        return {"chunked_prefill_size": chunk, "cuda_graph_max_bs": max_bs,
                "max_num_batched_tokens": dep.max_num_batched_tokens or prefill,
                "block_size": dep.block_size or 1}

    def mem_fraction(self, dep: DeploymentView, gpu: GPU) -> float:
        return sglang_defaults(gpu, dep)[2]

    # --- budget line --------------------------------------------------------------------------

    def budget(self, dep: DeploymentView, gpu: GPU, *, requested: int, budgeted: int,
               baseline: int, loaded: int, mfs: float) -> Budget:
        """KV = free after loading − (1 − mfs) × free before loading (SGL@d315eb7
        kv_cache_configurator.py)."""
        pre_free = gpu.total_bytes - baseline
        return Budget(int(mfs * pre_free) - loaded, int(mfs * pre_free))

    def blocks(self, available: int, block_bytes: int, block_size: int, layout: str) -> int:
        """A page-aligned token count on a uniform pool."""
        blocks = available // block_bytes if available > 0 else 0
        if layout == "uniform":
            blocks = blocks // max(1, block_size) * max(1, block_size)
        return blocks

    def used(self, comps: Sequence[C], base: int, envelope: int) -> tuple[int, list[C]]:
        """Activations, graphs and non-torch memory live in the (1 − mfs) slack: every
        component not loaded at start and not the KV cache counts against it."""
        outside = [c for c in comps if c.where in ("budget", "runtime") and c.bytes > 0
                   and not loaded_at_start(c) and c.category != "kv_cache"]
        inside = sum(c.bytes for c in comps if loaded_at_start(c) or c.category == "kv_cache")
        return base + max(envelope, inside) + sum(c.bytes for c in outside), outside

    def held_before_kv(self, c: ComponentView) -> bool:
        return loaded_at_start(c)

    # --- flags and notes ----------------------------------------------------------------------

    def scratch_keys(self, dep: DeploymentView) -> tuple[str, ...]:
        return (DP_ATTENTION_SCRATCH,) if dep.enable_dp_attention else ()

    def check_layout(self, dep: DeploymentView) -> None:
        if dep.enable_dp_attention and dep.tp % dep.dp:
            raise LayoutError(f"SGLang DP attention needs --dp ({dep.dp}) to divide --tp "
                              f"({dep.tp})", hint="e.g. --tp 8 --dp 8 --enable-dp-attention")

    def derived_max_model_len(self, cfg: dict[str, Any]) -> tuple[int, str] | None:
        return first_length_key_max_len(cfg)

    def launches(self, module: str) -> bool:
        return module in ("sglang.launch_server", "sglang.srt.server")

    def serve_command(self, model: str, *, tp: int, pp: int, dp: int, ep: bool,
                      max_model_len: int | None, max_num_seqs: int) -> list[str]:
        """``python -m sglang.launch_server``: ``--ep-size`` spans the TP ranks (``dp`` is not
        a replica count here, so it is not written)."""
        parts = [f"python -m sglang.launch_server --model-path {model} --tp {tp}"]
        parts += [f"--pp-size {pp}"] if pp > 1 else []
        parts += ["--ep-size", str(tp)] if ep else []
        return [*parts, f"--context-length {max_model_len}",
                f"--max-running-requests {max_num_seqs}"]

    def notes(self, dep: DeploymentView, mfs: float) -> list[str]:
        return [f"SGLang: mem_fraction_static {mfs} "
                f"({'given' if dep.mem_fraction_static else 'SGLang heuristic'}), "
                "weights sharded as vLLM shards them"]


ENGINE = SGLang()
