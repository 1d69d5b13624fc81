"""Where vLLM's Triton fused-MoE caches live from 0.8.0 on, by release: per call (freed when
each MoE layer returns) or in a workspace kept across layers and after the profile run.

``memprof.core.terms.activation`` charges the fused-MoE caches either inside the MoE stage of the
profile run (per call: they are then never live beside another stage, the sampler's included) or
as a persistent workspace term added to the largest stage. This module says which holds for a
deployment, and sizes the per-token fp8 input quantisation that the block / per-tensor fp8 path
allocates beside the caches.

Read in the PyPI wheels (model_executor/layers/fused_moe/fused_moe.py ``fused_experts_impl``,
quantization/fp8.py ``Fp8MoEMethod.apply``, fused_moe/layer.py or
unquantized_fused_moe_method.py ``UnquantizedFusedMoEMethod.forward_cuda``):

- 0.8.3, 0.8.5.post1, 0.9.0, 0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.12.0, 0.13.0: with the default
  all2all backend (no pplx / DeepEP prepare-finalize, so no modular kernel is built), both the
  unquantised and vLLM's own fp8 method (block 128x128 or per-tensor, on sm89+ or ROCm) call
  ``fused_experts`` → ``fused_experts_impl``, which ``torch.empty``s ``cache13``
  [M·k·max(N, K)] and ``intermediate_cache2`` [M·k, N/2] on every call, M = min(T,
  ``VLLM_FUSED_MOE_CHUNK_SIZE``). DeepGEMM needs ``VLLM_USE_DEEP_GEMM=1`` (default 0) and the
  CUTLASS block-scaled grouped GEMM sm100 (``allow_cutlass_block_scaled_grouped_gemm``), so an
  H100 runs the Triton kernels.
- 0.14.0 and 0.14.1: both methods build a ``FusedMoEModularKernel`` with ``TritonExperts``
  (fp8: ``oracle/fp8.py make_fp8_moe_kernel``), whose workspaces come from
  ``current_workspace_manager().get_simultaneous`` (modular_kernel.py, vllm/v1/worker/
  workspace.py): persistent, the ``WorkspaceManager`` term of ``activation.py``.

The modular kernel's own workspaces (used only with an all2all prepare-finalize) were
``torch.empty`` per call through 0.10.x and became persistent in 0.11.0
(``SharedResizableBuffer``); memprof models the default all2all backend only.
"""

from __future__ import annotations

from memprof.base.units import cdiv
from memprof.core.deployment import Deployment
from memprof.core.models.spec import QuantConfig
from memprof.core.versions import Rule, rule_in_force, value_at
from memprof.core.weights.formats import fp8_on_marlin

# The Triton fused-MoE caches per call from 0.8.0 (``value``: the cache layout, as
# ``activation.V0_MOE_CACHES_PER_CALL`` names it) for the methods ``triton_caches_per_call``
# accepts; from 0.14.0 they come from the WorkspaceManager. Both engines of 0.8.x-0.10.x call the
# same model code; ``V0_MOE_CACHES_PER_CALL`` is read first for V0 through 0.8.2.
TRITON_MOE_CACHES_PER_CALL: tuple[Rule, ...] = (
    Rule(name="triton_moe_caches_per_call", changes="activation peak: fused-MoE caches",
         since="0.8.0", until="0.14.0", value="cache13",
         introduced_by="V1 on by default in 0.8.0, calling fused_experts_impl as V0 does",
         removed_by="FusedMoEModularKernel with TritonExperts for the unquantised and fp8 "
         "methods, workspaces from the WorkspaceManager (read in 0.14.0)",
         source="0.8.0-0.8.2 as V0_MOE_CACHES_PER_CALL (the same function); 0.8.3, "
         "0.8.5.post1, 0.9.0, 0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.12.0 and 0.13.0 "
         "model_executor/layers/fused_moe/fused_moe.py fused_experts_impl: cache13 = "
         "torch.empty(M * top_k_num * max(N, K)), intermediate_cache2 = torch.empty((M * "
         "top_k_num, N // 2)); quantization/fp8.py Fp8MoEMethod.apply and "
         "UnquantizedFusedMoEMethod.forward_cuda call fused_experts; 0.14.0 / 0.14.1 "
         "unquantized_fused_moe_method.py and oracle/fp8.py build FusedMoEModularKernel("
         "..., TritonExperts(...))", generation=""),
)

# The fp8 input quantisation of ``fused_experts_impl`` (``moe_kernel_quantize_input``, twice per
# chunk: the hidden states [M, K] before w13 and ``intermediate_cache2`` [M·k, N/2] before w2).
# Both outputs are locals of the chunk loop, so at the w2 GEMM the two fp8 tensors (1 B an
# element) and their fp32 scales are live beside the caches: per-token-group scales [rows,
# cols/128] for a block checkpoint (``per_token_group_quant_fp8``, group = block_k), one fp32
# scale for per-tensor (``ops.scaled_fp8_quant``). 0.8.x quantises inside
# ``invoke_fused_moe_kernel`` instead (not read: not counted there). ``value``: both live.
FP8_MOE_INPUT_QUANT: tuple[Rule, ...] = (
    Rule(name="fp8_moe_input_quant", changes="activation peak: fused-MoE fp8 input quant",
         since="0.9.0", until="0.14.0", value=True,
         introduced_by="moe_kernel_quantize_input in fused_experts_impl (read in 0.9.0)",
         removed_by="the modular kernel (read in 0.14.0)",
         source="0.9.0, 0.9.2, 0.10.0, 0.10.1.1, 0.11.0, 0.12.0 and 0.13.0 "
         "model_executor/layers/fused_moe/fused_moe.py fused_experts_impl: "
         "qcurr_hidden_states, a1q_scale = moe_kernel_quantize_input(curr_hidden_states, ...), "
         "qintermediate_cache2, a2q_scale = moe_kernel_quantize_input(intermediate_cache2, "
         "...); fused_moe/utils.py _fp8_quantize: per_token_group_quant_fp8(A, block_k) "
         "(quantization/utils/fp8_utils.py: x_q empty_like fp8, x_s fp32 x.shape[:-1] + "
         "(x.shape[-1] // group_size,)) or ops.scaled_fp8_quant", generation=""),
)

FP8_SCALE_BYTES = 4  # fp32 scales


def _vllm_fp8(quant: QuantConfig | None, arch: str) -> bool:
    """vLLM's own ``Fp8Config`` (block or per-tensor checkpoint, or ``--quantization fp8``) whose
    ``Fp8MoEMethod`` runs the Triton kernels (not Marlin: ``fp8_on_marlin``)."""
    return (quant is not None and quant.method in ("fp8", "fp8_per_tensor")
            and not quant.checkpoint_format and not fp8_on_marlin(quant, arch))


def triton_caches_per_call(dep: Deployment, quant: QuantConfig | None, arch: str) -> str | None:
    """The ``TRITON_MOE_CACHES_PER_CALL`` cache layout when this deployment's MoE layers run
    ``fused_experts_impl`` with per-call caches, else None (other methods keep the estimate's
    persistent-workspace reading)."""
    if not (quant is None or quant.method == "none" or _vllm_fp8(quant, arch)):
        return None
    r = rule_in_force(TRITON_MOE_CACHES_PER_CALL, dep.engine_version, dep.engine)
    return None if r is None else str(r.value)


def fp8_input_quant_bytes(dep: Deployment, quant: QuantConfig | None, arch: str, m: int, k: int,
                          hidden: int, inter: int) -> int:
    """Bytes of the two fp8 input quantisations live at the w2 GEMM (``FP8_MOE_INPUT_QUANT``):
    [m, hidden] and [m·k, inter] at 1 B, with fp32 scales per ``block_k`` columns (block) or one
    each (per-tensor); 0 outside the rule or for another method. ``m``: the chunk's tokens;
    ``inter``: the local intermediate size (N/2)."""
    if not _vllm_fp8(quant, arch) or not value_at(FP8_MOE_INPUT_QUANT, dep.engine_version,
                                                  False, dep.engine):
        return 0
    assert quant is not None
    q = m * hidden + m * k * inter
    if quant.block:
        bk = quant.block[1]
        return q + (m * cdiv(hidden, bk) + m * k * cdiv(inter, bk)) * FP8_SCALE_BYTES
    return q + 2 * FP8_SCALE_BYTES
