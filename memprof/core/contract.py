"""The JSON contract (``schema_version`` 1) of an estimate, built here in the core so that the
gate, the budget API and the pytest plugin read it without going through a renderer; the
``json`` reporter only serialises it. Sizes are integer bytes; every field is documented in
docs/json.md.

``EstimateReport`` is the one object every reporter renders: the estimate, the remedies that
were evaluated, and an optional comparison.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from memprof import __version__
from memprof.core.components import Component
from memprof.core.deployment import Deployment
from memprof.core.engine_log import engine_log
from memprof.core.engines import engine_of
from memprof.core.engines.vllm_pooling import convert_of
from memprof.core.estimate import Estimate, RankEstimate
from memprof.core.remedies import Remedies

SCHEMA_VERSION = 1


class CommandFlags(NamedTuple):
    """What memprof did not apply of a pasted serve command: the flags ignored (no effect on
    GPU memory) and those not modelled (they may change it), each with what it changes."""

    ignored: tuple[str, ...] = ()
    not_modelled: tuple[tuple[str, str], ...] = ()


class EstimateReport(NamedTuple):
    """What ``memprof estimate`` shows: the estimate, its remedies, ``--compare``'s other
    estimate with the changes that made it (``None`` without ``--compare``), and the flags of a
    pasted serve command memprof did not apply (``None`` without one)."""

    estimate: Estimate
    remedies: Remedies | None = None
    other: Estimate | None = None
    changes: str | None = None
    command: CommandFlags | None = None


def component_dict(c: Component) -> dict[str, Any]:
    return {
        "name": c.name,
        "category": c.category,
        "bytes": c.bytes,
        "count": c.count,
        "bytes_each": c.bytes_each,
        "profiled": c.profiled,
        "where": c.where,
        "placeholder": c.placeholder,
        "formula": c.formula,
    }


def rank_dict(r: RankEstimate) -> dict[str, Any]:
    c = r.coord
    return {
        "rank": c.rank,
        "ranks": list(r.same_as),
        "count": len(r.same_as),
        "tp_rank": c.tp_rank,
        "pp_stage": c.pp_stage,
        "dp_rank": c.dp_rank,
        "ep_rank": c.ep_rank,
        "components": [component_dict(x) for x in r.components],
        "tensors": [
            {"module": t.module, "group": t.group, "bytes": t.bytes, "count": t.count,
             "bytes_each": t.bytes_each, "padding_bytes": t.padding_each * t.count,
             "replicas": t.replicas, "formula": t.formula}
            for t in r.tensors
        ],
        "weights_bytes": r.weights_bytes,
        "requested_bytes": r.requested_bytes,
        "available_kv_bytes": r.available_kv_bytes,
        "kv_cache_bytes": r.kv.kv_cache_bytes,
        "kv_cache_bytes_per_token": r.plan.bytes_per_token,
        "kv_layout": r.plan.layout,
        "block_size": r.plan.block_size,
        "block_bytes": r.plan.block_bytes,
        "num_gpu_blocks": r.kv.num_gpu_blocks,
        "kv_cache_tokens": r.kv.tokens,
        "max_concurrency": round(r.kv.max_concurrency, 4),
        "request_kv_bytes": r.kv.request_bytes,
        "estimated_max_model_len": r.estimated_max_model_len,
        "headroom_bytes": r.headroom_bytes,
        "scratch_savings": [{"name": n, "per_layer_bytes": a, "shared_bytes": b}
                            for n, a, b in r.scratch_savings],
        "verdict": r.verdict,
        "reasons": list(r.reasons),
    }


def lora_fields(d: Deployment) -> dict[str, Any]:
    """The deployment's LoRA settings as given (``null`` where left to vLLM's default), present
    only where ``--enable-lora`` is on, so a deployment without LoRA keeps its JSON."""
    if not d.enable_lora:
        return {}
    return {"enable_lora": True, "max_loras": d.max_loras, "max_lora_rank": d.max_lora_rank,
            "lora_extra_vocab_size": d.lora_extra_vocab_size, "lora_dtype": d.lora_dtype,
            "fully_sharded_loras": d.fully_sharded_loras, "enable_lora_bias": d.enable_lora_bias,
            "specialize_active_lora": d.specialize_active_lora}


def feature_fields(d: Deployment) -> dict[str, Any]:
    """The settings of the runner's optional features, each present only where it is on, so a
    deployment without them keeps its JSON: LoRA (``lora_fields``), the pooling runner
    (``runner``, ``convert``, and ``task`` where the older flag gave it) and the drafter
    (``speculative_method``, with draft tokens, and ``speculative_model``, an EAGLE head)."""
    return {
        **lora_fields(d),
        **({"runner": "pooling", "convert": convert_of(d)}
           if convert_of(d) is not None else {}),
        **({"task": d.task} if d.task is not None else {}),
        **({"speculative_method": d.speculative_method} if d.num_speculative_tokens else {}),
        # the EAGLE head as named (--speculative-model), present where it is set
        **({"speculative_model": d.speculative_model}
           if d.num_speculative_tokens and d.speculative_model is not None else {}),
    }


def estimate_dict(e: Estimate) -> dict[str, Any]:
    d = e.deployment
    q = e.quant
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "memprof", "version": __version__},
        "model": {
            "name": e.spec.name,
            "architecture": e.spec.architecture,
            "family": e.spec.family,
            "num_layers": e.spec.num_layers,
            "mtp_layers": len(e.spec.mtp_layers),
            "dtype": e.model_dtype,
            "quantization": None if q is None else q.method,
            "source": e.spec.source,
        },
        "deployment": {
            "engine": d.engine,
            "engine_version": d.engine_version,
            "entrypoint": d.entrypoint if engine_of(d).has_entrypoint else None,
            "tensor_parallel_size": d.tp,
            "pipeline_parallel_size": d.pp,
            "data_parallel_size": d.dp,
            "enable_expert_parallel": d.enable_expert_parallel,
            "expert_parallel_size": d.ep_size,
            "world_size": d.world_size,
            "dtype": d.dtype,
            "quantization": d.quantization,
            "kv_cache_dtype": d.kv_cache_dtype,
            "max_model_len": e.max_model_len,
            "max_num_seqs": d.max_num_seqs,
            "max_num_batched_tokens": e.max_num_batched_tokens,
            "gpu_memory_utilization": d.gpu_memory_utilization,
            "block_size": e.ranks[0].plan.block_size,
            "kv_cache_memory_bytes": d.kv_cache_memory_bytes,
            "enforce_eager": d.enforce_eager,
            "num_speculative_tokens": d.num_speculative_tokens,
            "attention_backend": d.attention_backend,
            "scratch": d.scratch,
            "mem_fraction_static": e.mem_fraction_static,
            "enable_dp_attention": d.enable_dp_attention,
            "chunked_prefill_size": d.chunked_prefill_size,
            "cuda_graph_max_bs": d.cuda_graph_max_bs,
            "max_total_tokens": d.max_total_tokens,
            "disable_custom_all_reduce": d.disable_custom_all_reduce,
            "no_gpu_peer_access": d.no_gpu_peer_access,
            "nnodes": d.nnodes,
            "disable_hybrid_kv_cache_manager": d.disable_hybrid_kv_cache_manager,
            "enable_prefix_caching": d.enable_prefix_caching,
            "mamba_cache_mode": d.mamba_cache_mode,
            "vllm_use_v1": d.vllm_use_v1,
            "vllm_use_flashinfer_sampler": d.vllm_use_flashinfer_sampler,
            "vllm_rocm_use_aiter": d.vllm_rocm_use_aiter,
            "nccl_nvls_enable": d.nccl_nvls_enable,
            "vllm_allreduce_use_symm_mem": d.vllm_allreduce_use_symm_mem,
            "nvidia_driver": d.nvidia_driver,
            "hf_overrides": d.hf_overrides,
            "assume_architecture": d.assume_architecture,
            "limit_mm_per_prompt": d.limit_mm_per_prompt,
            "mm_processor_kwargs": d.mm_processor_kwargs,
            "mm_encoder_tp_mode": d.mm_encoder_tp_mode,
            "gpu_memory_in_use": d.gpu_memory_in_use,
            # LoRA, the pooling runner and the drafter, each present where it is on
            **feature_fields(d),
            # present where it is not the default, so a cold start keeps its JSON
            **({"compile_cache": d.compile_cache} if d.compile_cache != "cold" else {}),
            **({"max_model_len_auto_fit_from": e.auto_fit_from}
               if e.auto_fit_from is not None else {}),
            # present where the launch sets it, so a deployment without it keeps its JSON
            **({"pytorch_cuda_alloc_conf": d.pytorch_cuda_alloc_conf}
               if d.pytorch_cuda_alloc_conf is not None else {}),
        },
        "gpu": {"name": e.gpu.name, "total_bytes": e.gpu.total_bytes, "arch": e.gpu.arch,
                "exact": e.gpu.exact},
        "ranks": [{**rank_dict(r), "engine_log": engine_log(e, r)} for r in e.ranks],
        "summary": {
            "verdict": e.verdict,
            "kv_cache_tokens": e.kv_cache_tokens,
            "kv_cache_bytes_per_token": e.kv_cache_bytes_per_token,
            "max_concurrency": round(e.max_concurrency, 4),
            "weights_bytes_max": e.weights_bytes_max,
            "headroom_bytes": min(r.headroom_bytes for r in e.ranks),
            "reasons": list(e.reasons),
            "notes": list(e.notes),
        },
    }


def report_dict(report: EstimateReport) -> dict[str, Any]:
    """The whole JSON document of ``memprof estimate --format json``."""
    e, remedies, other = report.estimate, report.remedies, report.other
    d = estimate_dict(e)
    d["summary"]["remedies"] = [
        {"change": r.change, "verdict": r.verdict, "kv_cache_tokens": r.kv_cache_tokens,
         "headroom_bytes": r.headroom_bytes, "gpus": r.gpus, "same_gpus": r.same_gpus,
         "detail": r.detail} for r in (remedies or [])]
    if remedies is not None and remedies.tried:
        d["summary"]["remedies_note"] = remedies.summary()
    if report.command is not None:
        d["serve_command"] = {
            "ignored": list(report.command.ignored),
            "not_modelled": [{"flag": f, "note": n} for f, n in report.command.not_modelled]}
    if other is not None:
        from memprof.core.compare import diff  # only an estimate with --compare has one

        d["compare"] = {
            "changes": report.changes,
            "summary": {"verdict": other.verdict, "kv_cache_tokens": other.kv_cache_tokens,
                        "max_concurrency": round(other.max_concurrency, 4)},
            "components": [
                {"rank": x.rank, "name": x.component, "category": x.category,
                 "bytes": x.a_bytes, "compare_bytes": x.b_bytes, "delta_bytes": x.delta}
                for x in diff(e, other)],
        }
    return d
