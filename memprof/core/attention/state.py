"""The recurrent token mixers of hybrid models (``StateMixer``: Gated DeltaNet, Mamba-2, Kimi
Delta Attention): the state one request holds on one rank, the mixer's weights and its
profile-run live set; and ``HybridKind``, the answers ``kind_of`` gives for a layer whose mixer
replaces attention (its own state, weights and live set; the model's attention kind for the
questions about the model as a whole: block size, RoPE cache, backend facts).

The state is one vLLM ``MambaSpec`` per layer: one page per request whatever its length; the
page-size unification with the attention layers is ``memprof.core.hybrid_state``'s, applied by
``memprof.core.kvcache``. Sources, per kind, in each class.
"""

from __future__ import annotations

from dataclasses import replace

from memprof.core.attention.base import (
    ActQuery,
    AttentionKind,
    AttentionStage,
    KVLayerSpec,
    KVQuery,
    RopeCache,
    WeightSink,
)
from memprof.core.dtypes import dtype_bytes
from memprof.core.hybrid_state import (
    AlignedPages,
    gated_delta_net_state_shapes,
    kda_state_shapes,
    mamba2_state_shapes,
    state_page_bytes,
)
from memprof.core.kv_dtypes import DEFAULT as DEFAULT_KV_DTYPE
from memprof.core.models import Attention, Layer, ModelSpec, StateMixer
from memprof.core.versions import Rule, value_at

Shapes = tuple[tuple[int, ...], ...]

# Nemotron-H: from 0.13.0 an "auto" --mamba-ssm-cache-dtype becomes the config's
# mamba_ssm_cache_dtype, or float16 when the config has none (the family's builder puts that
# in ``StateMixer.config_ssm_dtype``); before, "auto" is the model dtype.
SSM_DTYPE_FROM_CONFIG: tuple[Rule, ...] = (
    Rule(name="mamba_ssm_cache_dtype_from_config", changes="KV: Mamba SSM state dtype",
         since="0.13.0", until=None, value=True,
         introduced_by="read in the 0.13.0 wheel (absent in 0.12.0; PR not identified)",
         source="0.13.0 / 0.14.1 / 0.18.0 model_executor/models/config.py "
         "NemotronHForCausalLMConfig.verify_and_update_config (getattr(hf_config, "
         "'mamba_ssm_cache_dtype', 'float16') when cache_config.mamba_ssm_cache_dtype is "
         "'auto')", applies_to="mamba2"),
)


class StateKind:
    """One mixer kind's answers (a subclass per ``StateMixer.kind``)."""

    name: str = ""

    def shapes(self, m: StateMixer, tp: int) -> Shapes:
        """The state tensors of one layer for one request on one rank."""
        raise NotImplementedError

    def dtypes(self, m: StateMixer, version: str | None = None) -> tuple[str, ...]:
        """The dtype of each state tensor at vLLM ``version`` (``""``: the model dtype): the
        conv state of ``mamba_cache_dtype``, the SSM / recurrent state of
        ``mamba_ssm_cache_dtype`` ("auto": as the conv state), which vLLM takes from the
        config while ``SSM_DTYPE_FROM_CONFIG`` holds for a family that declares one."""
        ssm = m.state_dtype
        if m.config_ssm_dtype and value_at(SSM_DTYPE_FROM_CONFIG, version, False):
            ssm = m.config_ssm_dtype
        return (m.conv_dtype, ssm)

    def weights(self, w: WeightSink, m: StateMixer, p: str) -> None:
        raise NotImplementedError

    def activation(self, m: StateMixer, q: ActQuery) -> AttentionStage:
        raise NotImplementedError


class GatedDeltaNet(StateKind):
    """Qwen3-Next's linear attention (vLLM v0.11.0 model_executor/models/qwen3_next.py
    ``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz`` column-parallel ``H → 2·k_heads·k_dim +
    2·v_heads·v_dim``, ``in_proj_ba`` ``H → 2·v_heads``, ``conv1d`` a column-parallel
    ``kernel → 2·k_heads·k_dim + v_heads·v_dim`` without quantisation or bias, ``dt_bias``
    (model dtype) and ``A_log`` (fp32) of ``v_heads / tp``, ``norm`` an ``RMSNormGated`` of
    ``v_dim``, ``out_proj`` row-parallel ``v_heads·v_dim → H``. State: conv + recurrent, both
    of ``mamba_cache_dtype`` (``gated_delta_net_state_dtype``: the model dtype under "auto")."""

    name = "gdn"

    def shapes(self, m: StateMixer, tp: int) -> Shapes:
        return gated_delta_net_state_shapes(tp=tp, num_k_heads=m.num_k_heads,
                                            num_v_heads=m.num_heads, head_k_dim=m.head_k_dim,
                                            head_v_dim=m.head_v_dim, conv_kernel=m.conv_kernel)

    def weights(self, w: WeightSink, m: StateMixer, p: str) -> None:
        h, g, la = w.spec.hidden_size, "linear attention (GDN)", p + "linear_attn."
        key, value = m.num_k_heads * m.head_k_dim, m.num_heads * m.head_v_dim
        w.linear(la + "in_proj_qkvz", g, 2 * key + 2 * value, h, shard="col")
        w.linear(la + "in_proj_ba", g, 2 * m.num_heads, h, shard="col")
        w.linear(la + "conv1d", g, 2 * key + value, m.conv_kernel, shard="col", quantise=False)
        w.vector(la + "dt_bias", g, m.num_heads, sharded=True)
        w.vector(la + "A_log", g, m.num_heads, "float32", sharded=True)
        w.vector(la + "norm", g, m.head_v_dim)
        w.linear(la + "out_proj", g, h, value, shard="row")

    def activation(self, m: StateMixer, q: ActQuery) -> AttentionStage:
        """[approximation] the projections' outputs, the conv output and the core and gated-norm
        outputs alive together (``Qwen3NextGatedDeltaNet.forward`` / ``_forward``)."""
        t, s, tp = q.t, q.s, q.tp
        key, value = m.num_k_heads * m.head_k_dim // tp, m.num_heads * m.head_v_dim // tp
        return AttentionStage(label=self.name, out_proj="out_proj", parts=[
            ("in_proj_qkvz out [T,2k+2v]", t * (2 * key + 2 * value) * s),
            ("in_proj_ba out [T,2·heads]", t * 2 * (m.num_heads // tp) * s),
            ("conv out [T,2k+v]", t * (2 * key + value) * s),
            ("core out [T,v]", t * value * s),
            ("gated norm out [T,v]", t * value * s)])


class Mamba2(StateKind):
    """A Mamba-2 mixer (vLLM v0.11.2 model_executor/layers/mamba/mamba_mixer2.py
    ``MambaMixer2``, as Nemotron-H and Granite-4.0-H build it): ``in_proj`` column-parallel
    ``H → 2·d_inner + 2·groups·state + heads`` (groups replicated per head shard), ``conv1d``
    ``kernel → d_inner + 2·groups·state`` (+ bias), ``A`` (fp32), ``D`` and ``dt_bias`` (model
    dtype) of ``heads / tp``, ``norm`` a ``Mixer2RMSNormGated`` of ``d_inner / tp``, ``out_proj``
    row-parallel ``d_inner → H``. State (``mamba2_state_shape``): conv of
    ``mamba_cache_dtype``, SSM of ``mamba_ssm_cache_dtype``."""

    name = "mamba2"

    def _groups(self, m: StateMixer, tp: int) -> int:
        from memprof.core.hybrid_state import extra_groups_for_head_shards

        return m.num_k_heads + extra_groups_for_head_shards(m.num_k_heads, tp)

    def shapes(self, m: StateMixer, tp: int) -> Shapes:
        return mamba2_state_shapes(tp=tp, intermediate_size=m.intermediate_size,
                                   n_groups=m.num_k_heads, num_heads=m.num_heads,
                                   head_dim=m.head_v_dim, state_size=m.head_k_dim,
                                   conv_kernel=m.conv_kernel)

    def weights(self, w: WeightSink, m: StateMixer, p: str) -> None:
        h, g, mx = w.spec.hidden_size, "mamba mixer", p + "mixer."
        gs = self._groups(m, w.tp) * m.head_k_dim  # groups × state, padded for head shards
        conv = m.intermediate_size + 2 * gs
        w.linear(mx + "in_proj", g, m.intermediate_size + conv + m.num_heads, h, shard="col",
                 bias=m.proj_bias)
        w.linear(mx + "conv1d", g, conv, m.conv_kernel, shard="col", bias=m.conv_bias,
                 quantise=False)
        w.vector(mx + "A", g, m.num_heads, "float32", sharded=True)
        w.vector(mx + "D", g, m.num_heads, sharded=True)
        w.vector(mx + "dt_bias", g, m.num_heads, sharded=True)
        w.vector(mx + "norm", g, m.intermediate_size, sharded=True)
        w.linear(mx + "out_proj", g, h, m.intermediate_size, shard="row", bias=m.proj_bias)

    def activation(self, m: StateMixer, q: ActQuery) -> AttentionStage:
        """[approximation] ``in_proj`` output, the conv output (x, B, C), the SSM output and the
        gated-norm output alive together (``MambaMixer2.forward_cuda``)."""
        t, s, tp = q.t, q.s, q.tp
        inner = m.intermediate_size // tp
        bc = 2 * self._groups(m, tp) * m.head_k_dim // tp
        return AttentionStage(label=self.name, out_proj="out_proj", parts=[
            ("in_proj out [T,2·inner+2·G·N+heads]",
             t * (2 * inner + bc + m.num_heads // tp) * s),
            ("conv out [T,inner+2·G·N]", t * (inner + bc) * s),
            ("ssm out [T,inner]", t * inner * s),
            ("gated norm out [T,inner]", t * inner * s)])


class KimiDeltaAttention(StateKind):
    """Kimi-Linear's KDA (vLLM v0.11.2 model_executor/layers/kda.py ``KimiDeltaAttention``): q, k, v
    column-parallel ``H → heads·head_dim`` each, ``f_a_proj`` ``H → head_dim`` (replicated) and
    ``f_b_proj`` ``head_dim → heads·head_dim``, ``b_proj`` ``H → heads``, three fp32 short
    convs ``q/k/v_conv1d`` ``kernel → heads·head_dim``, ``A_log`` (heads) and ``dt_bias``
    (heads·head_dim) fp32,
    ``g_a_proj`` / ``g_b_proj`` like f, ``o_norm`` (``head_dim``), ``o_proj`` row-parallel.
    State (``kda_state_shape``): three conv states and the recurrent one."""

    name = "kda"

    def shapes(self, m: StateMixer, tp: int) -> Shapes:
        return kda_state_shapes(tp=tp, num_heads=m.num_heads, head_dim=m.head_k_dim,
                                conv_kernel=m.conv_kernel)

    def dtypes(self, m: StateMixer, version: str | None = None) -> tuple[str, ...]:
        """``kda_state_dtype``: the three conv states of ``mamba_cache_dtype``, the recurrent
        state fp32."""
        return (m.conv_dtype,) * 3 + ("float32",)

    def weights(self, w: WeightSink, m: StateMixer, p: str) -> None:
        h, g, sa = w.spec.hidden_size, "linear attention (KDA)", p + "self_attn."
        proj = m.num_heads * m.head_k_dim
        for name in ("q_proj", "k_proj", "v_proj"):
            w.linear(sa + name, g, proj, h, shard="col")
        for x in ("f", "g"):
            w.linear(sa + f"{x}_a_proj", g, m.head_k_dim, h, shard="rep")
            w.linear(sa + f"{x}_b_proj", g, proj, m.head_k_dim, shard="col")
        w.linear(sa + "b_proj", g, m.num_heads, h, shard="col")
        for name in ("q_conv1d", "k_conv1d", "v_conv1d"):  # params_dtype=torch.float32
            w.vector(sa + name, g, proj * m.conv_kernel, "float32", sharded=True)
        w.vector(sa + "A_log", g, m.num_heads, "float32", sharded=True)
        w.vector(sa + "dt_bias", g, proj, "float32", sharded=True)
        w.vector(sa + "o_norm", g, m.head_k_dim)
        w.linear(sa + "o_proj", g, h, proj, shard="row")

    def activation(self, m: StateMixer, q: ActQuery) -> AttentionStage:
        """[approximation] q, k, v and their convolved copies, the gates and the output."""
        t, s, tp = q.t, q.s, q.tp
        proj = m.num_heads * m.head_k_dim // tp
        return AttentionStage(label=self.name, out_proj="o_proj", parts=[
            ("q/k/v out [T,3·h·d]", t * 3 * proj * s),
            ("conv out [T,3·h·d]", t * 3 * proj * s),
            ("gates [T,2·h·d]", t * 2 * proj * s),
            ("core out [T,h·d]", t * proj * s)])


class NoMixer(StateKind):
    """A layer with no token mixer (Nemotron-H's MLP-only ``-`` layers, vLLM
    ``NemotronHMLPDecoderLayer``): no state, no KV, no weights of its own."""

    name = "none"

    def shapes(self, m: StateMixer, tp: int) -> Shapes:
        return ()

    def dtypes(self, m: StateMixer, version: str | None = None) -> tuple[str, ...]:
        return ()

    def weights(self, w: WeightSink, m: StateMixer, p: str) -> None:
        return None

    def activation(self, m: StateMixer, q: ActQuery) -> AttentionStage:
        return AttentionStage(label=self.name, parts=[], out_proj="(none)")


STATE_KINDS: dict[str, StateKind] = {k.name: k for k in (GatedDeltaNet(), Mamba2(),
                                                          KimiDeltaAttention(), NoMixer())}
"""``StateMixer.kind`` → the mixer's answers."""


def state_bytes(m: StateMixer, tp: int, model_dtype_bytes: int,
                version: str | None = None) -> int:
    """Bytes of one layer's state for one request on one rank at vLLM ``version``, before page
    padding (``MambaSpec.page_size_bytes``)."""
    kind = STATE_KINDS[m.kind]
    sizes = tuple(dtype_bytes(d) if d else model_dtype_bytes for d in kind.dtypes(m, version))
    return state_page_bytes(kind.shapes(m, tp), sizes)


class HybridKind(AttentionKind):
    """A layer whose ``StateMixer`` replaces attention: the mixer's state page (one block per
    request, padded later to the attention page), weights and live set; the model's attention
    kind (``base``) for the block size, RoPE caches and backend facts."""

    def __init__(self, state: StateKind, base: AttentionKind) -> None:
        self.state, self.base = state, base
        self.name = state.name
        self.packed_kv_pool = base.packed_kv_pool
        self.aux_gemm_streams = base.aux_gemm_streams
        self.backend_picks_block = base.backend_picks_block
        self.scratch_key = base.scratch_key

    def default_block_size(self, arch: str) -> int:
        return self.base.default_block_size(arch)

    def kv_pages(self, a: Attention, q: KVQuery) -> list[KVLayerSpec]:
        """One state page per request (sized before padding, and at the newest release's
        dtypes: ``memprof.core.kvcache`` pads it to the unified page of the deployment's
        release), or none for a layer without a mixer."""
        assert a.mixer is not None
        if a.mixer.kind == "none":
            return []
        page = state_bytes(a.mixer, q.tp, q.elem_bytes(DEFAULT_KV_DTYPE))
        shapes = " + ".join("×".join(map(str, s)) for s in self.state.shapes(a.mixer, q.tp))
        return [KVLayerSpec(name="state", kind="state", block_size=q.block, page_bytes=page,
                            formula=f"{self.name} state {shapes} per request")]

    def activation(self, a: Attention, q: ActQuery) -> AttentionStage:
        assert a.mixer is not None
        return self.state.activation(a.mixer, q)

    def rope_caches(self, spec: ModelSpec, layers: list[Layer], model_dtype: str,
                    max_pos: int) -> list[RopeCache]:
        return self.base.rope_caches(spec, layers, model_dtype, max_pos)

    def weights(self, w: WeightSink, layer: Layer, p: str) -> None:
        assert layer.attention.mixer is not None
        self.state.weights(w, layer.attention.mixer, p)

    def sglang_rope_buffers(self, spec: ModelSpec, layers: list[Layer],
                            max_pos: int) -> list[tuple[str, int, str]]:
        return self.base.sglang_rope_buffers(spec, layers, max_pos)


def attention_of(a: Attention) -> Attention:
    """The model's attention as described on ``a`` (its mixer dropped)."""
    return replace(a, mixer=None) if a.mixer is not None else a


def pad_state_pages(specs: list[KVLayerSpec], aligned: AlignedPages) -> list[KVLayerSpec]:
    """Every state page padded to the unified page (``mamba_page_size_padded``), every spec at
    the unified block size (the attention pages were sized at it already)."""
    return [s._replace(page_bytes=aligned.page_bytes, block_size=aligned.block_size,
                    formula=f"{s.formula}, padded {aligned.padding_pct:.2f}% to the "
                    f"{aligned.block_size}-token attention page")
            if s.kind == "state" else s for s in specs]
