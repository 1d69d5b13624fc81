"""MLP weights of one layer: dense, routers, experts (TP-split or EP-spread, quantised, MXFP4
with the kernels' padding, block-fp8 refused where the split leaves partial blocks) and shared
experts."""

from __future__ import annotations

from memprof.base.errors import LayoutError
from memprof.base.units import cdiv, round_up
from memprof.core.deployment import experts_on_rank
from memprof.core.gpus import arch_cc
from memprof.core.models import Layer, QuantConfig
from memprof.core.models.families import family_row
from memprof.core.versions import Rule, value_at
from memprof.core.weights.formats import (
    Param,
    fp8_on_marlin,
    linear_bytes,
    linear_params,
    marlin_blocks,
)
from memprof.core.weights.shard import Shard

# The MXFP4 MoE backend vLLM picks by default on Hopper (SM90). value: "marlin" | "triton".
MXFP4_SM90_BACKEND: tuple[Rule, ...] = (
    Rule(name="mxfp4_sm90_backend", changes="weights: MXFP4 experts (backend)",
         since=None, until="0.12.0", value="marlin",
         introduced_by="gpt-oss / MXFP4 MoE (first released in 0.10.1)",
         removed_by="triton_kernels bundled as vllm/third_party/triton_kernels (0.12.0 wheel)",
         source="0.10.1 / 0.11.0 quantization/mxfp4.py Mxfp4MoEMethod._should_use_marlin "
         "(Marlin when `not has_triton_kernels()`; the 0.10.1-0.11.2 wheels ship no "
         "triton_kernels)", applies_to="mxfp4"),
    Rule(name="mxfp4_sm90_backend", changes="weights: MXFP4 experts (backend)",
         since="0.12.0", until=None, value="triton",
         introduced_by="vllm/third_party/triton_kernels in the wheel (first in 0.12.0)",
         source="0.12.0 quantization/mxfp4.py get_mxfp4_backend (TRITON when "
         "has_triton_kernels() and SM90 <= cc < SM110); utils/import_utils.py "
         "has_triton_kernels looks for vllm.third_party.triton_kernels", applies_to="mxfp4"),
)

# Whether the Triton path keeps the raw e8m0 ``w13/w2_weight_scale`` Parameters beside the
# swizzled copies in its PrecisionConfigs. value: True (kept) / False (deleted).
MXFP4_TRITON_RAW_SCALES: tuple[Rule, ...] = (
    Rule(name="mxfp4_triton_raw_scales", changes="weights: MXFP4 experts (raw scales)",
         since=None, until="0.25.0", value=True,
         introduced_by="Triton MXFP4 path (0.10.1 mxfp4.py process_weights_after_loading: "
         "`del layer.w13_weight` / `w2_weight` only)", removed_by="vLLM PR #46549",
         source="0.24.0 fused_moe/oracle/mxfp4.py convert_to_mxfp4_moe_kernel_format (TRITON "
         "branch swizzles the scales and deletes only the weights)", applies_to="mxfp4"),
    Rule(name="mxfp4_triton_raw_scales", changes="weights: MXFP4 experts (raw scales)",
         since="0.25.0", until=None, value=False, introduced_by="vLLM PR #46549",
         source="0.25.0 fused_moe/oracle/mxfp4.py (TRITON branch: `del "
         "layer.w13_weight_scale`, `del layer.w2_weight_scale`)", applies_to="mxfp4"),
)

# SGLang, DeepSeek-V4 MXFP4 routed experts on Hopper (the Marlin W4A16 path of SGLang PR #24986,
# `--moe-runner-backend marlin`): whether the loader's fp32 ``w13/w2_weight_scale_inv`` stay
# registered after the Marlin repack. value: True (kept) / False (deleted). Releases before
# 0.5.12 have no such path (no row holds). The deepseek-v4-hopper@2026-07 image stands between
# 0.5.14 and 0.5.15 by date (memprof/core/releases.py).
SGLANG_MARLIN_STALE_SCALE_INV: tuple[Rule, ...] = (
    Rule(name="sglang_dsv4_marlin_stale_scale_inv",
         changes="weights: MXFP4 experts (stale fp32 scale_inv)",
         since="0.5.12", until="0.5.16", value=True, engine="sglang",
         introduced_by="SGLang PR #24986 (DeepSeek-V4 w4(mxfp4)a16 on Hopper; upstream main "
         "2026-05-13, first in the sglang v0.5.12 tag)",
         removed_by="SGLang PR #30272 (upstream main 2026-07-18, first in the sglang v0.5.16 "
         "tag): prepare_moe_mxfp4_layer_for_marlin ends with `for stale in "
         "(\"w13_weight_scale_inv\", \"w2_weight_scale_inv\"): delattr(layer, stale)`, the "
         "deletion PR #29797 (\"drop stale mxfp4 marlin scales after repack\") describes",
         source="sglang v0.5.12 – v0.5.15.post1 tags (and sgl-project/sglang@00563d36) "
         "layers/quantization/fp8.py Fp8MoEMethod's weights (is_fp4_expert: "
         "w13_weight_scale_inv (E, 2·I/tp, H/32) and w2_weight_scale_inv (E, H, I/tp/32) in "
         "torch.float32); layers/quantization/marlin_utils_fp4.py "
         "prepare_moe_mxfp4_layer_for_marlin reads *_weight_scale_inv, assigns the e8m0 Marlin "
         "copies to *_weight_scale and deletes neither *_weight_scale_inv; the "
         "deepseek-v4-hopper image (InferenceX issue #2128, 2026-07-09) measures them",
         applies_to="dsv4"),
    Rule(name="sglang_dsv4_marlin_stale_scale_inv",
         changes="weights: MXFP4 experts (stale fp32 scale_inv)",
         since="0.5.16", until=None, value=False, engine="sglang",
         introduced_by="SGLang PR #30272 (first in the sglang v0.5.16 tag)",
         source="sglang v0.5.16 – v0.5.18 tags, SGL@d315eb7 and the sglang 0.5.23 wheel "
         "layers/quantization/marlin_utils_fp4.py prepare_moe_mxfp4_layer_for_marlin ends by "
         "deleting both *_weight_scale_inv (delattr); the later design "
         "(sgl-project/sglang@001a2ec3 quantization/mxfp4_marlin_moe.py "
         "Mxfp4MarlinMoEMethod.apply) repacks into *_weight_scale_inv in place; InferenceX issue "
         "#2128's closing comment (2026-09-09) measures ~103-104 GB/GPU on the re-pinned image, "
         "22 GiB under the 125.65 GiB before", applies_to="dsv4"),
)

# SGLang on ROCm with ``--enable-ep-moe`` and aiter (``SGLANG_USE_AITER=1``), block-fp8 experts:
# ``EPMoE.__init__`` keeps ``self.w13_weight_fp8 = (self.w13_weight, self.w13_weight_scale_inv)``
# (and the w2 pair), references to the Parameters ``create_weights`` made; the ROCm branch of
# ``Fp8EPMoEMethod.process_weights_after_loading`` then replaces ``layer.w13_weight`` /
# ``w2_weight`` with ``shuffle_weight(...)`` copies (new tensors) and, on gfx94x (e4m3fnuz), the
# scales with ``normalize_e4m3fn_to_e4m3fnuz``'s doubled copies, so the loaded fp8 experts and
# their scales stay allocated beside the ones the kernels use: two fp8 copies of every routed
# expert on the rank, as many bytes as bf16 experts. value: True (kept) / False (not).
SGLANG_ROCM_EPMOE_STALE_FP8: tuple[Rule, ...] = (
    Rule(name="sglang_rocm_epmoe_stale_fp8", changes="weights: EP-MoE fp8 experts on ROCm (stale "
         "copy)", since=None, until="0.4.8.post1", value=False, engine="sglang",
         introduced_by="before 0.4.3 (read in the sglang 0.4.8 wheel)",
         removed_by="the aiter shuffle of EP-MoE weights (read in the sglang 0.4.8.post1 wheel)",
         source="sglang 0.4.8 layers/moe/ep_moe/layer.py Fp8EPMoEMethod."
         "process_weights_after_loading: the ROCm branch only re-views the weights as e4m3fnuz "
         "(normalize_e4m3fn_to_e4m3fnuz: weight.view), no new weight tensor"),
    Rule(name="sglang_rocm_epmoe_stale_fp8", changes="weights: EP-MoE fp8 experts on ROCm (stale "
         "copy)", since="0.4.8.post1", until="0.4.9.post5", value=True, engine="sglang",
         introduced_by="read in the sglang 0.4.8.post1 wheel",
         removed_by="EPMoE rebuilt on FusedMoE (read in the sglang 0.4.9.post5 wheel)",
         source="sglang 0.4.8.post1 (to 0.4.9.post4) layers/moe/ep_moe/layer.py: EPMoE.__init__ "
         "sets self.w13_weight_fp8 / self.w2_weight_fp8 to the created Parameters; "
         "Fp8EPMoEMethod.process_weights_after_loading (0.4.9.post3: layers/quantization/"
         "fp8.py) under block quant and _use_aiter sets layer.w13_weight = Parameter("
         "shuffle_weight(layer.w13_weight.data, (16, 16))) and the same for w2; seen in "
         "sgl-project/sglang issue #7691 (DeepSeek-R1, EP8 on MI300X, "
         "v0.4.8.post1-rocm630: 'mem usage=166.59 GB' per rank)"),
    Rule(name="sglang_rocm_epmoe_stale_fp8", changes="weights: EP-MoE fp8 experts on ROCm (stale "
         "copy)", since="0.4.9.post5", until=None, value=False, engine="sglang",
         introduced_by="read in the sglang 0.4.9.post5 wheel",
         source="sglang 0.4.9.post5 (0.4.10, 0.5.x the same) layers/moe/ep_moe/layer.py: "
         "EPMoE(FusedMoE) builds w13_weight_fp8 / w2_weight_fp8 in forward_deepgemm, at call "
         "time, from the Parameters then registered"),
)

# HopperMXScaleLayout.swizzle_data (vllm/third_party/triton_kernels/tensor_details/
# layout_details/hopper_scale.py, 0.25.0): SWIZZLE_ALIGN_M = 2 * num_warps * 2 * 8 (256 at
# the 8 warps vLLM passes without EP), SWIZZLE_ALIGN_K = 2.
HOPPER_SCALE_ALIGN_M, HOPPER_SCALE_ALIGN_K = 256, 2


def mxfp4_sm90_backend(version: str | None) -> str:
    """The MXFP4 MoE backend vLLM ``version`` picks by default on SM90 (``MXFP4_SM90_BACKEND``)."""
    return str(value_at(MXFP4_SM90_BACKEND, version, "triton"))


def moe_caches_per_call(quant: QuantConfig | None, arch: str, version: str | None) -> bool:
    """Does the MoE backend allocate its intermediate caches on every call (freed when the layer
    returns) instead of keeping one workspace for all layers?

    True for MXFP4 experts on SM90 while ``MXFP4_SM90_BACKEND`` is Marlin: ``Mxfp4MoEMethod.apply``
    calls ``fused_marlin_moe`` directly, which ``torch.empty``s ``intermediate_cache2`` [M·k, N]
    and ``intermediate_cache13`` [M·k·max(2N, K)] each time (0.10.1 and 0.11.0
    model_executor/layers/quantization/mxfp4.py ``apply``, fused_moe/fused_marlin_moe.py
    ``fused_marlin_moe``), with no chunking of M."""
    return (quant is not None and quant.method == "mxfp4" and arch.startswith("sm90")
            and mxfp4_sm90_backend(version) == "marlin")


def mxfp4_moe_layout(arch: str, version: str | None = None) -> tuple[int, int, int]:
    """MXFP4 MoE padding vLLM's kernels impose: (I multiple, H multiple, scale-row multiple).

    ``Mxfp4MoEMethod.create_weights`` / the mxfp4 oracle (vLLM 0.33.0
    ``quantization/mxfp4.py``, ``fused_moe/oracle/mxfp4.py``): SM90 runs the Triton kernels
    from 0.12.0 (I to 64, H unchanged; their scale layout pads rows to 256 and columns to 2) and
    Marlin before (``MXFP4_SM90_BACKEND``); SM100 runs FlashInfer TRT-LLM (I to 128, H to 256);
    ROCm and the CUTLASS/DeepGEMM paths use 128/128; Marlin (others) 128/256
    (``create_weights``: "n % 256 == 0 and k % 128 == 0", I to 128, H to 256).
    """
    if arch.startswith("sm10"):
        return 128, 256, 1
    if arch.startswith("sm90"):
        if mxfp4_sm90_backend(version) == "marlin":
            return 128, 256, 1
        return 64, 1, HOPPER_SCALE_ALIGN_M
    if arch.startswith("gfx"):
        return 128, 128, 1
    return 128, 256, 1


# SGLang's shared-experts fusion (models/deepseek_v2.py): the shared expert of DeepSeek-V3/R1
# (the family row's ``fusable_shared_experts`` architectures, 256 routed experts) appended to
# the routed experts as copies, each held like a routed expert (FusedMoE num_experts = 256 +
# copies) while the separate shared-experts MLP is not built. value: the copies ("tp": tp_size),
# 0 (not fused) or 1 (one copy: the shared expert's own bytes, in the MoE's layout; memprof keeps
# the separate MLP, which holds the same).
SGLANG_SHARED_EXPERTS_FUSION: tuple[Rule, ...] = (
    Rule(name="sglang_shared_experts_fusion", changes="weights: DeepSeek shared expert (fused)",
         since=None, until="0.4.6", value=0, engine="sglang", applies_to="mla",
         introduced_by="before 0.4.3 (read in the sglang 0.4.3 – 0.4.5 wheels)",
         removed_by="on by default in 0.4.6 (determine_n_share_experts_fusion)",
         source="sglang 0.4.3 / 0.4.4 models/deepseek_v2.py: no fusion; 0.4.5: "
         "ServerArgs.n_share_experts_fusion = 0 and DeepseekV2ForCausalLM.__init__ fuses only "
         "a --n-share-experts-fusion N the user gives (not modelled)"),
    Rule(name="sglang_shared_experts_fusion", changes="weights: DeepSeek shared expert (fused)",
         since="0.4.6", until="0.4.7", value="tp", engine="sglang", applies_to="mla",
         introduced_by="on by default in 0.4.6 (read in the sglang 0.4.6 wheel)",
         removed_by="one fused copy in 0.4.7 (determine_num_fused_shared_experts)",
         source="sglang 0.4.6 models/deepseek_v2.py DeepseekV2ForCausalLM."
         "determine_n_share_experts_fusion: n_share_experts_fusion = tp_size when "
         "torch.cuda.get_device_capability() >= (9, 0), the architecture is "
         "DeepseekV3ForCausalLM with 256 routed experts and DeepEP is off; DeepseekV2MoE then "
         "builds FusedMoE(num_experts=n_routed_experts + n_share_experts_fusion) and no "
         "shared_experts"),
    Rule(name="sglang_shared_experts_fusion", changes="weights: DeepSeek shared expert (fused)",
         since="0.4.7", until=None, value=1, engine="sglang", applies_to="mla",
         introduced_by="read in the sglang 0.4.7 wheel",
         source="sglang 0.4.7 (to SGL@d315eb7) models/deepseek_v2.py "
         "determine_num_fused_shared_experts: num_fused_shared_experts = n_shared_experts (1) "
         "on CUDA without EP or DeepEP: one copy"),
)


def _capability_major(arch: str) -> int:
    """The compute capability's major: ``sm90`` → 9, ``sm100`` → 10, ``sm89`` → 8; AMD
    ``gfx9xx`` → 9 (torch on ROCm reports gfx942 as (9, 4)); 0 when unknown."""
    cc = arch_cc(arch)
    if cc is not None and cc >= 10:
        return cc // 10
    return 9 if arch.startswith("gfx9") else 0


def block_divides(block: tuple[int, int], i_local: int, split: int, module: str) -> None:
    """A block-fp8 checkpoint's experts must split into whole blocks: ``Fp8MoEMethod.
    create_weights`` raises when the per-rank intermediate size (w13's output per gate/up, w2's
    input) is not a multiple of ``block_n``, or, when the experts are split (TP > 1), of
    ``block_k`` (vLLM v0.9.2 and v0.11.0 model_executor/layers/quantization/fp8.py: "The
    output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n
    = 128"; SGLang raises the same in ``Fp8MoEMethod.create_weights``, python/sglang/srt/layers/
    quantization/fp8.py, read in the 0.4.9.post2 wheel; e.g. Qwen3-235B-A22B-FP8 at TP8, QwenLM/
    Qwen3 issue #1485). With expert parallelism the experts stay whole."""
    bn, bk = block
    bad = bn if i_local % bn else (bk if split > 1 and i_local % bk else 0)
    if bad:
        raise LayoutError(
            f"{module}: the experts' intermediate size per rank ({i_local}) is not divisible by "
            f"the checkpoint's fp8 block ({bad}); the engine refuses to load it",
            hint="use a TP size that leaves whole blocks per rank, or --enable-expert-parallel "
            "(whole experts per rank)")


class MlpWeights(Shard):
    """The MLP / MoE block of a layer."""

    def mlp(self, layer: Layer, p: str) -> None:
        m = layer.mlp
        h = self.spec.hidden_size
        if m.kind == "none":
            return
        if m.kind == "dense":
            self.linear(p + ("mlp.gate_up_proj" if m.gated else "mlp.up_proj"), "mlp (dense)",
                        (2 if m.gated else 1) * m.intermediate_size, h,
                        shard="col", bias=m.mlp_bias)
            self.linear(p + "mlp.down_proj", "mlp (dense)", h, m.intermediate_size, shard="row",
                        bias=m.mlp_bias)
            return
        self.router(layer, p)
        fused = self.fused_shared_copies(layer)
        self.experts(layer, p, fused)
        if m.shared_intermediate_size and not fused:
            gs = "shared experts"
            self.linear(p + ("mlp.shared_experts.gate_up_proj" if m.gated
                             else "mlp.shared_experts.up_proj"), gs,
                        (2 if m.gated else 1) * m.shared_intermediate_size, h, shard="col")
            self.linear(p + "mlp.shared_experts.down_proj", gs, h, m.shared_intermediate_size,
                        shard="row")
            if m.shared_expert_gate:
                self.linear(p + "mlp.shared_expert_gate", gs, 1, h, shard="rep", quantise=False)

    def router(self, layer: Layer, p: str) -> None:
        """Routers stay in the model dtype (``ReplicatedLinear(..., quant_config=None)``) unless
        the family builds the gate in fp32 (``MLP.router_fp32``);
        DeepSeek's ``e_score_correction_bias`` is fp32; DeepSeek-V4 hash layers hold a
        ``tid2eid`` table (int32 in vLLM) instead of a gate bias."""
        m = layer.mlp
        h = self.spec.hidden_size
        g = "router"
        if m.router_fp32:  # an fp32 nn.Linear(bias=False): one [E, H] fp32 weight per rank
            self.vector(p + "mlp.gate", g, m.num_experts * h, "float32")
        else:
            self.linear(p + "mlp.gate", g, m.num_experts, h, shard="rep", bias=m.router_bias,
                        quantise=False)
        if m.e_score_correction_bias:
            self.vector(p + "mlp.gate.e_score_correction_bias", g, m.num_experts, "float32")
        if m.hash_routed:
            self.vector(p + "mlp.gate.tid2eid", g, self.spec.vocab_size * m.top_k, "int32")

    def fused_shared_copies(self, layer: Layer) -> int:
        """The shared expert's copies fused into the routed experts (``SGLANG_SHARED_EXPERTS_
        FUSION``): tp_size where the rows say so, for a fusable architecture with 256 routed
        experts (and one shared expert of the routed experts' size) on a capability-9+ GPU;
        otherwise 0 (memprof keeps the separate shared-experts MLP)."""
        m = layer.mlp
        dep = self.dep
        fusion = value_at(SGLANG_SHARED_EXPERTS_FUSION, dep.engine_version, 0, engine=dep.engine)
        if (fusion != "tp" or m.num_experts != 256
                or m.shared_intermediate_size != m.moe_intermediate_size
                or self.spec.architecture not in family_row(self.spec.family).fusable_shared_experts
                or _capability_major(self.arch) < 9):
            return 0
        return dep.tp

    def experts(self, layer: Layer, p: str, fused: int = 0) -> None:
        m = layer.mlp
        h = self.spec.hidden_size
        dep = self.dep
        n_experts = m.num_experts + fused
        if dep.enable_expert_parallel:
            assert self.coord.ep_rank is not None
            e_local = experts_on_rank(n_experts, dep.ep_size, self.coord.ep_rank)
            i_local, moe_tp = m.moe_intermediate_size, 1
        else:
            e_local, moe_tp = n_experts, dep.moe_tp_size
            i_local = cdiv(m.moe_intermediate_size, moe_tp)
        module = p + "mlp.experts"
        q = self.quantised(module, expert=True)
        if family_row(self.spec.family).mxfp4_experts:
            ed = (q.expert_dtype if q else None) or "fp4"
            q = None if q is None else (QuantConfig(method="mxfp4", group_size=32, bits=4)
                                        if ed == "fp4" else q)
        g = "experts"
        # w13: gate and up stacked (2·I rows), or up only for a non-gated MoE
        # (FusedMoE(is_act_and_mul=False): I rows; vLLM v0.11.2 nemotron_h.py NemotronHMoE)
        n13 = (2 if m.gated else 1) * i_local
        if q is not None and q.method == "mxfp4":
            self.mxfp4_experts(module, layer, e_local, i_local, moe_tp)
            return
        if q is not None and q.method == "fp8" and q.block and not q.checkpoint_format:
            block_divides(q.block, i_local, moe_tp, module)
        if q is not None and q.method == "fp8" and q.block and not fp8_on_marlin(q, self.arch):
            # (below sm89 the experts are Marlin's, sized per expert by linear_bytes below:
            # prepare_moe_fp8_layer_for_marlin, utils/marlin_utils_fp8.py, v0.11.0)
            # FusedMoE fp8 block scales: w13 (E, 2·ceil(I/128), ceil(H/128)), w2 (E,
            # ceil(H/128), ceil(I/128)), fp32 (fp8.py Fp8MoEMethod.create_weights, v0.33.0).
            bo, bi = q.block
            params: tuple[Param, ...] = (
                Param("w13_weight", (e_local, n13, h), "float8_e4m3fn"),
                Param("w13_weight_scale_inv",
                      (e_local, (2 if m.gated else 1) * cdiv(i_local, bo), cdiv(h, bi)),
                      "float32"),
                Param("w2_weight", (e_local, h, i_local), "float8_e4m3fn"),
                Param("w2_weight_scale_inv", (e_local, cdiv(h, bo), cdiv(i_local, bi)),
                      "float32"))
            f13, f2 = f"{n13}×{h} fp8", f"{h}×{i_local} fp8 + block scales"
            blocks = 0
        else:
            _n13, f13 = linear_bytes(n13, h, q, self.b, self.arch, self.marlin_cc)
            _n2, f2 = linear_bytes(h, i_local, q, self.b, self.arch, self.marlin_cc)
            params = tuple(
                Param(f"w13_{x.name}", (e_local, *x.shape), x.dtype)
                for x in linear_params(n13, h, q, self.dtype, self.arch, self.marlin_cc)) + tuple(
                Param(f"w2_{x.name}", (e_local, *x.shape), x.dtype)
                for x in linear_params(h, i_local, q, self.dtype, self.arch, self.marlin_cc))
            blocks = marlin_blocks(q, self.arch, moe=True, marlin_cc=self.marlin_cc)
        self.add(module, g, params, replicas=1,
                 formula=f"{e_local} experts × [w13 {f13} + w2 {f2}]", marlin_blocks=blocks)
        if (q is not None and q.method == "fp8" and q.block and dep.enable_expert_parallel
                and self.arch.startswith("gfx")
                and value_at(SGLANG_ROCM_EPMOE_STALE_FP8, dep.engine_version, False,
                             engine=dep.engine)):
            # the loaded fp8 weights (and, where e4m3fnuz re-scales them, the loaded scales)
            # EPMoE's w13_weight_fp8 / w2_weight_fp8 still reference after the aiter shuffle
            stale = tuple(x for x in params if "scale" not in x.name
                          or self.arch.startswith("gfx94"))
            self.add(module + ".stale_fp8", g, stale, replicas=1,
                     formula=f"{e_local} experts × [w13 {f13} + w2 {f2}] loaded copy kept by "
                     f"EPMoE.w13/w2_weight_fp8 after the aiter shuffle (SGLang "
                     f"{dep.engine_version}, ROCm, assumes SGLANG_USE_AITER=1)")
        if m.expert_bias:
            self.add(module + ".w13_bias", g,
                     (Param("w13_bias", (e_local, 2 * i_local), self.dtype),), replicas=1,
                     formula=f"{e_local}×{2 * i_local}×{self.b}B")
            self.add(module + ".w2_bias", g, (Param("w2_bias", (e_local, h), self.dtype),),
                     replicas=moe_tp,
                     formula=f"{e_local}×{h}×{self.b}B")

    def mxfp4_experts(self, module: str, layer: Layer, e: int, i: int, moe_tp: int) -> None:
        """MXFP4 experts with the kernels' padding (see ``mxfp4_moe_layout``), the raw e8m0
        scales the Triton path keeps before 0.25.0 (``MXFP4_TRITON_RAW_SCALES``) and the bias
        dtype of the backend (Marlin: the model dtype, ``prepare_moe_fp4_layer_for_marlin``
        ``getattr(layer, name).to(param_dtype)``; the other backends: fp32)."""
        h = self.spec.hidden_size
        version = self.dep.engine_version
        pi, ph, prow = mxfp4_moe_layout(self.arch, version)
        ip, hp = round_up(i, pi), round_up(h, ph)
        marlin = not self.arch.startswith(("sm10", "gfx")) and (
            not self.arch.startswith("sm90") or mxfp4_sm90_backend(version) == "marlin")

        def one(name: str, rows: int, k: int) -> tuple[Param, Param]:
            # values two per byte + e8m0 scales (Hopper swizzle: rows to 256, columns to 2)
            cols = round_up(cdiv(k, 32), HOPPER_SCALE_ALIGN_K if prow > 1 else 1)
            return (Param(f"{name}_weight", (e, rows, k // 2), "uint8"),
                    Param(f"{name}_weight_scale", (e, round_up(rows, prow), cols), "uint8"))

        params = (*one("w13", 2 * ip, hp), *one("w2", hp, ip))
        padded = sum(x.bytes for x in params) // e
        raw = 2 * i * h // 2 + 2 * i * cdiv(h, 32) + h * i // 2 + h * cdiv(i, 32)
        pad_note = f", kernel padding I {i}→{ip}, H {h}→{hp}" if (ip, hp) != (i, h) else ""
        self.add(module, "experts", params, replicas=1, padding=e * (padded - raw),
                 formula=f"{e} experts × [w13 {2 * ip}×{hp} + w2 {hp}×{ip}] MXFP4 + e8m0 "
                 f"scales{pad_note}",
                 # prepare_moe_fp4_layer_for_marlin: marlin_make_workspace_new(device, 4)
                 marlin_blocks=4 if marlin else 0)
        if prow > 1 and value_at(MXFP4_TRITON_RAW_SCALES, version, False):
            kept = (Param("w13_weight_scale (raw)", (e, 2 * ip, cdiv(hp, 32)), "uint8"),
                    Param("w2_weight_scale (raw)", (e, hp, cdiv(ip, 32)), "uint8"))
            self.add(module + ".raw_scales", "experts", kept, replicas=1,
                     formula=f"{e}×[{2 * ip}×{cdiv(hp, 32)} + {hp}×{cdiv(ip, 32)}] e8m0 kept "
                     f"beside the swizzled copies (vLLM {version or 'newest'}, before PR #46549)")
        # the rows are SGLang's (Rule.engine): under any other engine none holds
        if (self.arch.startswith("sm90") and family_row(self.spec.family).mxfp4_experts
                and value_at(SGLANG_MARLIN_STALE_SCALE_INV, version, False,
                             engine=self.dep.engine)):
            # the loader's fp32 scales (one per 32 values), left registered beside the e8m0
            # Marlin copies counted above: 4 B per 32 values, 4× the e8m0 scales
            stale = (Param("w13_weight_scale_inv (stale)", (e, 2 * i, cdiv(h, 32)), "float32"),
                     Param("w2_weight_scale_inv (stale)", (e, h, cdiv(i, 32)), "float32"))
            self.add(module + ".stale_scale_inv", "experts", stale, replicas=1,
                     formula=f"{e}×[{2 * i}×{cdiv(h, 32)} + {h}×{cdiv(i, 32)}]×4B fp32 "
                     f"scale_inv kept after the Marlin repack (SGLang "
                     f"{version or 'newest'}, before PR #29797)")
        if layer.mlp.expert_bias:
            bdt, bb = (self.dtype, self.b) if marlin else ("float32", 4)
            how = "model dtype (Marlin)" if marlin else "fp32 (converted at load)"
            self.add(module + ".w13_bias", "experts",
                     (Param("w13_bias", (e, 2 * ip), bdt),), replicas=1,
                     padding=e * 2 * (ip * bb - i * self.b),
                     formula=f"{e}×{2 * ip}×{bb}B {how}")
            self.add(module + ".w2_bias", "experts", (Param("w2_bias", (e, hp), bdt),),
                     replicas=moe_tp,
                     padding=e * (hp * bb - h * self.b),
                     formula=f"{e}×{hp}×{bb}B {how}")
