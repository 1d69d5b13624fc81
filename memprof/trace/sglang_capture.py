"""What the replica builds for SGLang's decode CUDA graphs, as SGLang's ``CudaGraphRunner`` builds
them (read in the sglang 0.4.10 and 0.5.9 wheels; the releases between follow the estimate's
rules, ``memprof.core.engines.sglang_graphs``).

SGLang's window ("Capture cuda graph begin" … "Capture cuda graph end … mem usage", both read by
``get_available_gpu_memory`` after ``torch.cuda.empty_cache()``: 0.5.9
``model_executor/model_runner.py`` ``init_device_graphs``, 0.4.10 ``init_cuda_graphs``) holds,
in order:

1. ``attn_backend.init_cuda_graph_state(max_bs, max_num_token)`` on the stream the runner is
   built on (the backend's buffers: ``sglang_attention.capture_buffers``, allocated here by their
   bytes);
2. the runner's input buffers (``sglang_graph_inputs``, by shape and dtype: index vectors,
   ``custom_mask``, from 0.5.6 ``input_embeds``, at PP > 1 the proxy buffers), and
   from 0.5.1 the runner's ``next_token_logits_buffer``, fp32 ``[max_bs, vocab]`` (0.5.9
   ``model_executor/input_buffers.py`` ``GraphInputBuffers.create``: ``torch.zeros((max_num_token,
   vocab_size), dtype=torch.float)``);
3. ``graph_capture()``'s new stream; per batch size, in ``reversed(capture_bs)`` (ascending in
   0.4.3): ``init_forward_metadata_capture_cuda_graph`` (FlashInfer's per-size decode wrappers),
   ``run_once`` twice eagerly, then ``run_once`` captured into the global graph pool; the
   runner keeps what it returns (``self.output_buffers[bs] = output_buffers``; on a stage
   before the last, the hidden states and residual). The first capture's ``capture_begin``
   makes torch's generator graph state on the capture stream
   (``cudagraph.GENERATOR_GRAPH_STATE``).

``run_once`` is the model's whole forward, which ends in ``LogitsProcessor`` (the model classes
return ``self.logits_processor(...)``; 0.5.9 ``models/qwen3.py``, ``models/llama.py``). Its
decode path (``_get_logits``, 0.4.10 and 0.5.9 ``layers/logits_processor.py``), on the final
norm's output ``[bs, hidden]`` (``RMSNorm`` with a residual is in place: the last hidden states):

- ``torch.matmul(hidden_states, lm_head.weight.T)``: a new ``[bs, padded vocab / tp]`` tensor in
  the lm_head's dtype (the model dtype; ``ParallelLMHead`` pads the vocabulary to 64 before
  splitting it, ``sglang_graphs.LM_HEAD_VOCAB_PADDING``);
- at TP > 1 ``tensor_model_parallel_all_gather`` (0.5.9 ``distributed/parallel_state.py``
  ``GroupCoordinator.all_gather``): a ``[tp × bs, padded / tp]`` output, then ``reshape``,
  ``movedim(0, -1)`` and ``reshape`` to ``[bs, padded]``, a copy; the local output is dropped
  when ``logits`` is rebound to it;
- then ``logits[:, :vocab_size]``: through 0.4.10 ``.float()``, a new fp32 ``[bs, vocab]`` tensor
  that the runner keeps as the graph's output, so one per graph stays in the pool; from 0.5.1
  ``_copy_logits_to_buffer`` copies it into the runner's buffer and returns the buffer (nothing
  new kept).

Which of the two a release does is the estimate's rule (``sglang_graphs.SGLANG_GRAPH_LOGITS``);
the shapes and dtypes here are read from the source above, so that
``tests/test_sglang_trace_graphs.py`` can check them against the estimate's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core.components import TermContext
from memprof.core.engines.sglang_graph_inputs import InputBuffer
from memprof.core.engines.sglang_graphs import (
    LM_HEAD_VOCAB_PADDING,
    SGLANG_GRAPH_LM_HEAD,
    SGLANG_GRAPH_LOGITS,
)
from memprof.core.terms.common import is_last_stage
from memprof.core.versions import value_at

# one tensor the logits processor makes, by name, shape and dtype: the record the runner's input
# buffers are planned in (memprof/core/engines/sglang_graph_inputs.py)
Planned = InputBuffer


@dataclass(frozen=True, slots=True)
class LogitsPlan:
    """The logits processor inside one decode graph at batch ``bs``: the lm_head output, at
    TP > 1 the gather's output and its reshaped copy (``gather``, ``copy``), and the fp32
    logits made per graph and kept (``kept``, through 0.4.10) or copied into the runner's
    buffer (``buffer``, from 0.5.1: allocated once, before the capture)."""

    bs: int
    lm_head: Planned
    gather: Planned | None
    copy: Planned | None
    kept: Planned | None
    buffer: Planned | None

    def allocations(self) -> tuple[Planned, ...]:
        """The tensors made inside the graph, in allocation order (not the buffer)."""
        return tuple(p for p in (self.lm_head, self.gather, self.copy, self.kept)
                     if p is not None)


def logits_in_graph(ctx: TermContext) -> bool:
    """The rank's decode graphs hold the logits processor: the last pipeline stage (0.5.10
    ``models/qwen3.py`` ``forward``: ``if self.pp_group.is_last_rank`` calls it) at a release
    whose graphs hold it (``SGLANG_GRAPH_LM_HEAD``)."""
    return is_last_stage(ctx) and bool(value_at(SGLANG_GRAPH_LM_HEAD, ctx.dep.engine_version,
                                                True, engine="sglang"))


def logits_plan(ctx: TermContext, bs: int, max_bs: int) -> LogitsPlan:
    """What ``LogitsProcessor._get_logits`` makes at decode batch ``bs`` on this rank (module
    docstring), the runner's largest batch being ``max_bs``."""
    vocab, tp, dt = ctx.spec.vocab_size, max(1, ctx.dep.tp), ctx.model_dtype
    padded = -(-vocab // LM_HEAD_VOCAB_PADDING) * LM_HEAD_VOCAB_PADDING
    lm_head = Planned("lm_head output", (bs, padded // tp), dt)
    gather = copy = None
    if tp > 1:
        gather = Planned("all-gather output", (tp * bs, padded // tp), dt)
        copy = Planned("all-gather reshaped copy", (bs, padded), dt)
    per_graph = value_at(SGLANG_GRAPH_LOGITS, ctx.dep.engine_version, "shared buffer",
                         engine="sglang") == "per graph"
    kept = Planned("fp32 logits (kept)", (bs, vocab), "float32") if per_graph else None
    buffer = None if per_graph else Planned("next_token_logits_buffer", (max_bs, vocab),
                                            "float32")
    return LogitsPlan(bs=bs, lm_head=lm_head, gather=gather, copy=copy, kept=kept,
                      buffer=buffer)
