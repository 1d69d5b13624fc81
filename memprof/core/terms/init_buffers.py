"""Init buffers: the buffers a model class registers at construction, which count in "model
loading took". An attention kind declares that its models have them
(``AttentionKind.model_init_buffers``) and an engine that its model classes register them
(``Engine.registers_model_init_buffers``). Today one kind has them, DeepSeek-V4's:

- ``topk_indices_buffer``: ``[max_num_batched_tokens, index_topk]`` int32, on every rank, shared
  by the rank's indexer layers (0.20.0 ``model_executor/models/deepseek_v4.py::DeepseekV4Model
  .__init__``; 0.33.0 ``models/deepseek_v4/nvidia/model.py::DeepseekV4Model.__init__``); the MTP
  drafter builds a second one (0.33.0 ``nvidia/mtp.py::DeepSeekV4MultiTokenPredictor``) when
  speculative decoding is on;
- ``_mtp_hidden_buffer``: ``[max_num_batched_tokens, hc_mult × hidden]`` in the model dtype —
  which ranks hold it, and whether it needs speculative decoding, changed by release
  (``MTP_HIDDEN_BUFFER`` rows below).
"""

from __future__ import annotations

from memprof.base.units import fmt_bytes
from memprof.core.attention import kind_of
from memprof.core.components import Component, TermContext
from memprof.core.dtypes import dtype_bytes
from memprof.core.engines import engine_of
from memprof.core.terms.common import is_last_stage, profile_tokens
from memprof.core.versions import Rule, value_at

# Who allocates ``_mtp_hidden_buffer``: "every rank", "last stage" (PP), or "last stage with
# speculative decoding".
MTP_HIDDEN_BUFFER: tuple[Rule, ...] = (
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.20.0", until="0.21.0", value="every rank",
         introduced_by="DeepSeek-V4 support (first released in 0.20.0)",
         source="0.20.0 model_executor/models/deepseek_v4.py DeepseekV4Model.__init__ "
         "(unconditional, every rank)", applies_to="dsv4"),
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.21.0", until="0.27.0", value="last stage",
         introduced_by="'Only allocated on the last PP rank' (read in 0.21.0; PR not "
         "identified)",
         source="0.21.0 model_executor/models/deepseek_v4.py, 0.26.0 "
         "models/deepseek_v4/nvidia/model.py DeepseekV4Model.__init__", applies_to="dsv4"),
    Rule(name="dsv4_mtp_hidden_buffer", changes="DeepSeek-V4 _mtp_hidden_buffer",
         since="0.27.0", until=None, value="last stage with speculative decoding",
         introduced_by="vLLM PR #50312 (needs_mtp_hidden_states)",
         source="0.27.0 / 0.33.0 models/deepseek_v4/nvidia/model.py DeepseekV4Model.__init__",
         applies_to="dsv4"),
)


def init_buffer_terms(ctx: TermContext) -> list[Component]:
    """``topk_indices_buffer = mnbt × index_topk × 4 B`` (+ one more for the MTP drafter with
    speculative decoding) and ``_mtp_hidden_buffer = mnbt × hc_mult·H × s`` where the release's
    row says it is allocated."""
    spec, dep = ctx.spec, ctx.dep
    if (not engine_of(dep).registers_model_init_buffers or not spec.layers
            or not kind_of(spec.layers[0].attention).model_init_buffers):
        return []
    mnbt = profile_tokens(dep)
    topk = spec.layers[0].attention.index_topk
    version = dep.engine_version or ""
    spec_on = dep.speculative_mtp
    n_topk = 2 if spec_on and is_last_stage(ctx) else 1
    out = [Component(name="DeepSeek-V4 topk_indices_buffer", category="weights",
                     bytes=n_topk * mnbt * topk * 4, count=n_topk,
                     formula=f"{mnbt} tokens × {topk} top-k × 4 B int32"
                     + (" (target + MTP drafter)" if n_topk > 1 else ""))]
    who = value_at(MTP_HIDDEN_BUFFER, version, "last stage with speculative decoding")
    held = (who == "every rank" or (who == "last stage" and is_last_stage(ctx))
            or (who == "last stage with speculative decoding" and is_last_stage(ctx)
                and spec_on))
    if held:
        width = spec.hc_mult * spec.hidden_size
        s = dtype_bytes(ctx.model_dtype)
        n = mnbt * width * s
        out.append(Component(name="DeepSeek-V4 _mtp_hidden_buffer", category="weights",
                             bytes=n, formula=f"{mnbt} tokens × {spec.hc_mult}×"
                             f"{spec.hidden_size} × {s} B ({fmt_bytes(n)}; {who}, "
                             f"vLLM {version})"))
    return out
