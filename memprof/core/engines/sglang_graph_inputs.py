"""The input buffers SGLang's decode ``CudaGraphRunner`` allocates while it is built, per release
(read in the sglang 0.4.3, 0.4.10, 0.5.1, 0.5.3, 0.5.5, 0.5.6, 0.5.7, 0.5.9 and 0.5.19 wheels).

Every release makes them inside the window SGLang logs as "Capture cuda graph end. … mem usage"
(``CudaGraphRunner(self)`` between the two ``get_available_gpu_memory`` readings of
``model_runner.py``), on the stream the runner is built on, after the attention backend's
``init_cuda_graph_state`` and, where the runner makes it, beside the fp32 logits buffer
(``sglang_graphs.SGLANG_GRAPH_LOGITS``). With ``T = max_num_token`` (``max_bs`` at decode without
speculative decoding) and ``B = max_bs``::

    all         input_ids int64 [T], req_pool_indices int32 [B], seq_lens int32 [B],
                out_cache_loc int64 [T], positions int64 [T], mrope_positions int64 [3, B]
                (``[3, T]`` from 0.5.3, the same bytes at decode)
    0.4.10 -    + num_token_non_padded int32 [1], custom_mask bool [B × fill + T] (every
                backend's ``get_cuda_graph_seq_len_fill_value`` is 1 in 0.5.9), and at PP > 1
                ``pp_proxy_tensors``: hidden_states and residual [B, hidden], bfloat16 through
                0.5.3, the model dtype from 0.5.5
    0.5.6 -     + input_embeds [T, hidden] in the model dtype (``GraphInputBuffers.create``)
    0.5.19 -    req_pool_indices and seq_lens int64 (``runner/base_runner.py``)

Where they sit in torch's caching allocator: a buffer of at most 1 MiB is a small-pool block
(c10/cuda/CUDACachingAllocator.cpp ``kSmallSize``); the runner's stream already holds small
segments with free room from before the window (the weights' norms and the other small tensors
made since the start; ``empty_cache`` releases only whole free segments), so these are assumed to
add no segment [approximation: the free room of those segments is not tracked; on one H200 the
trace, which makes every buffer, reserved no segment for the small ones:
reports/gpu/sglang-trace-graphs/sglang-trace-graphs-h200-inputs.json]. A larger buffer
(``input_embeds`` or a ``pp_proxy_tensors`` buffer above 1 MiB: an 8B model's [256, 4,096]
bfloat16 is 2 MiB) is a large-pool block, placed by ``memprof.alloc``'s replica beside the backend
state and the logits buffer (``sglang_attention.reserved_on_streams``).

Not modelled (each adds buffers of its own): speculative decoding, encoder-decoder models, LoRA,
mamba state tracking, DP attention's gathered buffer (0.4.x) and two-batch overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

from memprof.core.dtypes import dtype_bytes
from memprof.core.versions import Rule, value_at

_READ = "read in the sglang {} wheel (first release read with it)"
_RUNNER = "model_executor/cuda_graph_runner.py CudaGraphRunner.__init__"

# The layout of the runner's input buffers (module docstring). value: the layout's name.
SGLANG_GRAPH_INPUTS: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_inputs", changes="CUDA graphs: the runner's input buffers",
         since=None, until="0.4.10", value="index buffers", engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.10"),
         source=f"sglang 0.4.3 {_RUNNER}: input_ids, req_pool_indices, seq_lens, "
         "out_cache_loc, positions, mrope_positions under torch.device('cuda'); no PP "
         "buffers (0.4.4 - 0.4.9 not read: 0.4.3's layout assumed)"),
    Rule(name="sglang_decode_graph_inputs", changes="CUDA graphs: the runner's input buffers",
         since="0.4.10", until="0.5.5", value="+ mask, bf16 pp", engine="sglang",
         introduced_by=_READ.format("0.4.10"), removed_by=_READ.format("0.5.5"),
         source=f"sglang 0.4.10, 0.5.1, 0.5.3 {_RUNNER}: + num_token_non_padded "
         "torch.zeros((1,), int32), custom_mask torch.ones((seq_lens.sum() + max_num_token) * "
         "num_tokens_per_bs, bool); pp_size > 1: pp_proxy_tensors hidden_states, residual "
         "torch.zeros((max_bs, hidden_size), dtype=torch.bfloat16)"),
    Rule(name="sglang_decode_graph_inputs", changes="CUDA graphs: the runner's input buffers",
         since="0.5.5", until="0.5.6", value="+ mask, pp", engine="sglang",
         introduced_by=_READ.format("0.5.5"), removed_by=_READ.format("0.5.6"),
         source=f"sglang 0.5.5 {_RUNNER}: pp_proxy_tensors in model_config.dtype"),
    Rule(name="sglang_decode_graph_inputs", changes="CUDA graphs: the runner's input buffers",
         since="0.5.6", until="0.5.19", value="+ mask, pp, input_embeds", engine="sglang",
         introduced_by=_READ.format("0.5.6"), removed_by=_READ.format("0.5.19"),
         source="sglang 0.5.6, 0.5.7, 0.5.9 model_executor/input_buffers.py "
         "GraphInputBuffers.create: + input_embeds torch.zeros((max_num_token, hidden_size), "
         "dtype=dtype) (0.5.10 - 0.5.18 not read: 0.5.9's layout assumed)"),
    Rule(name="sglang_decode_graph_inputs", changes="CUDA graphs: the runner's input buffers",
         since="0.5.19", until=None, value="+ mask, pp, input_embeds, int64 rows",
         engine="sglang", introduced_by=_READ.format("0.5.19"),
         source="sglang 0.5.19 model_executor/runner/base_runner.py: req_pool_indices "
         "torch.zeros((max_bs,), int64), seq_lens torch.full((max_bs,), fill, int64)"),
)


@dataclass(frozen=True, slots=True)
class InputBuffer:
    """One buffer the runner allocates: its name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        n = dtype_bytes(self.dtype)
        for d in self.shape:
            n *= d
        return n


def graph_input_buffers(version: str | None, max_bs: int, hidden: int, model_dtype: str,
                        pp: int) -> tuple[InputBuffer, ...]:
    """The runner's input buffers at ``version`` for decode batches up to ``max_bs`` (no
    speculative decoding: ``max_num_token`` = ``max_bs``), in allocation order."""
    layout = str(value_at(SGLANG_GRAPH_INPUTS, version, SGLANG_GRAPH_INPUTS[-1].value,
                          engine="sglang"))
    t = b = max_bs
    rows = "int64" if "int64 rows" in layout else "int32"
    out = [InputBuffer("input_ids", (t,), "int64")]
    if "input_embeds" in layout:
        out.append(InputBuffer("input_embeds", (t, hidden), model_dtype))
    out += [InputBuffer("req_pool_indices", (b,), rows), InputBuffer("seq_lens", (b,), rows),
            InputBuffer("out_cache_loc", (t,), "int64"), InputBuffer("positions", (t,), "int64"),
            InputBuffer("mrope_positions", (3, t), "int64")]
    if "mask" in layout:
        out += [InputBuffer("num_token_non_padded", (1,), "int32"),
                InputBuffer("custom_mask", (b * 1 + t,), "bool")]
    if "pp" in layout and pp > 1:
        dt = "bfloat16" if "bf16 pp" in layout else model_dtype
        out += [InputBuffer("pp_proxy hidden_states", (b, hidden), dt),
                InputBuffer("pp_proxy residual", (b, hidden), dt)]
    return tuple(out)


def large_input_bytes(buffers: tuple[InputBuffer, ...]) -> tuple[int, ...]:
    """The buffers above the small-block limit (1 MiB), which take large-pool blocks; the others
    are assumed to fit the small segments already on the stream (module docstring)."""
    from memprof.alloc.constants import K_SMALL_SIZE

    return tuple(x.nbytes for x in buffers if x.nbytes > K_SMALL_SIZE)


def inputs_words(buffers: tuple[InputBuffer, ...]) -> str:
    """The formula's words for ``buffers``."""
    large = large_input_bytes(buffers)
    big = [x for x in buffers if x.nbytes in large]
    shown = ", ".join(f"{x.name} {list(x.shape)} {x.dtype}" for x in big)
    return (f"the runner's {len(buffers)} input buffers (large: {shown or 'none'}; the small "
            "ones in the small segments already on the stream [approximation])")


RULES: tuple[tuple[Rule, ...], ...] = (SGLANG_GRAPH_INPUTS,)
"""The rows of this module (``memprof versions`` lists them with the engine's)."""
