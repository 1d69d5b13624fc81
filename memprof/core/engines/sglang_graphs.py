"""SGLang's decode CUDA graphs, per release: which batch sizes ``CudaGraphRunner`` captures and what
each capture keeps allocated (read in the PyPI wheels, 0.4.3 – 0.5.19).

SGLang captures one graph of the whole decode forward per batch size (``CudaGraphRunner.capture``,
``model_executor/cuda_graph_runner.py``; 0.5.19 ``runner/decode_cuda_graph_runner.py``), every
one into the process's single graph pool (``global_graph_memory_pool``), and logs the drop in free
memory across the runner's construction as "Capture cuda graph end. … mem usage=X GB" (read after
``empty_cache``: ``get_available_gpu_memory``). It is not vLLM's piecewise capture: no graph per
attention split, no capture-size list of vLLM's, no estimate subtracted from a budget.

The batch sizes (``get_batch_sizes_to_capture``; from 0.5.3 ``ServerArgs._generate_cuda_graph_
batch_sizes``), cut at ``--cuda-graph-max-bs`` (``SGLANG_GRAPH_MAX_BS`` gives its default) and at
the request pool's rows (``--max-running-requests`` where given; the default pool has at least
2,048 rows, above every default grid)::

    0.4.3 – 0.4.4   [1, 2, 4] + 8..160 step 8                       (ROCm: + 168..256 step 8)
    0.4.5 – 0.4.6   [1, 2, 4, 8] + 16..160 step 8                   (0.4.5 ROCm, 0.4.6 above
                    81,920 MiB with --dp 1: + 160..256 step 8)
    0.4.7           the same, + 160..256 step 8 above 96 GiB, + 256..512 step 16 above
                    180,000 MiB; a --cuda-graph-max-bs beyond the grid's end adds
                    range(end, max_bs + 1, 16)
    0.4.8 – 0.5.2   the same at 90 GiB and 160,000 MiB
    0.5.3 – 0.5.9   [1, 2, 4, 8, 12] + 16..256 step 8 + 272..496 step 16 + 512..max_bs step 32
    0.5.10 –        the same, and a --cuda-graph-max-bs off the grid is appended

(0.4.10 on: with DP attention only multiples of the attention TP size are kept.) 0.4.3 captures
in ascending order, every later release largest first.

What each capture keeps: the runner stores every graph's output (``self.output_buffers[bs] =
out``). Through 0.4.10 the output is ``LogitsProcessor._get_logits``' ``logits[:, :vocab_size]
.float()``, a new fp32 ``[bs, vocab]`` tensor made inside the capture, so one per graph stays in
the pool; from 0.5.1 the logits are copied into ``next_token_logits_buffer``, one fp32
``[max_bs, vocab]`` tensor the runner allocates before capturing (``_copy_logits_to_buffer``;
0.5.9 ``input_buffers.py``, 0.5.19 ``runner/base_runner.py``).

The captured forward ends in the model's ``LogitsProcessor`` (every model class returns
``self.logits_processor(...)``), so the lm_head GEMM's output is a decode live-set member in the
pool, unlike vLLM's graphs, which stop at the hidden states (``compute_logits`` runs outside
them): ``_get_logits`` makes ``torch.matmul(hidden_states, lm_head.weight.T)``, a new
``[bs, padded vocab / tp]`` tensor in the model dtype, and at TP > 1
``GroupCoordinator.all_gather`` a ``[tp, bs, padded vocab / tp]`` output and its
``movedim``/``reshape`` copy ``[bs, padded vocab]``, before the fp32 logits above are made from it
(``lm_head_stages``; read in the 0.4.3, 0.5.1, 0.5.10 and 0.5.19 wheels).

On a pipeline stage before the last no logits are made: each graph keeps its ``PPProxyTensors``
output, the stage's hidden states and residual (``stage_outputs_kept``). The runner's input
buffers, also made inside the window, are ``sglang_graph_inputs``.

The attention backend's capture state, which the runner's construction also allocates
(FlashInfer's index buffers and a decode wrapper with its own workspace per batch size, FA3's and
TRT-LLM's page tables, Triton's split-KV logits), is ``sglang_attention.capture_state``, by the
backend SGLang picks per release, GPU and model.

From 0.5.14 the decode graphs are captured after the prefill CUDA graphs (where those are on:
``prefill_graph_reserve_mib``) into the same global pool (``SGLANG_DECODE_AFTER_PREFILL``); from
0.5.16 the logits buffer (``GraphSharedOutput``) is allocated by the prefill runner first and is
not in the decode figure. Through 0.5.18 each runner captures under ``graph_capture()`` with no
stream (both runners, read in the 0.5.14 – 0.5.18 wheels), and ``GroupCoordinator.graph_capture``
makes a new one (``self.device_module.Stream()``, distributed/parallel_state.py): torch's caching
allocator hands a free block only to an allocation on the stream it was made on
(c10/cuda/CUDACachingAllocator.cpp ``get_free_block``), so the blocks the prefill captures freed
hold none of the decode live sets, which take segments of their own as when captured first.
From 0.5.19 both capture on one stream (``get_or_create_global_graph_capture_stream``: "every
capture pass reserves the pool's scratch once instead of per stream"), whose cuBLAS workspace
the prefill capture made and whose freed blocks (up to the prefill chunk's tokens, more than the
largest decode batch) hold the decode live sets, so the decode figure holds no pool tensors of
its own [approximation: the prefill pool is not modelled, only assumed larger].

The prefill graphs' own figure ("Capture piecewise CUDA graph end … mem usage", 0.5.14 on
"Capture target prefill CUDA graph end … mem usage") is a component of its own
(``memprof/core/terms/cudagraph.py`` ``prefill_graph_terms``).

Not modelled (stated in the component's formula): the speculative-decoding and
``--disable-cuda-graph-padding`` grids.
"""

from __future__ import annotations

from typing import cast

from memprof.core.engines.base import DeploymentView
from memprof.core.gpus import GPU
from memprof.core.versions import Rule, value_at

_READ = "read in the sglang {} wheel (first release with it)"
_RUNNER = "model_executor/cuda_graph_runner.py get_batch_sizes_to_capture"
# ParallelLMHead pads the vocabulary to a multiple of 64 (layers/vocab_parallel_embedding.py
# DEFAULT_VOCAB_PADDING_SIZE, sglang 0.4.3 - 0.5.19) before splitting it by TP.
LM_HEAD_VOCAB_PADDING = 64

# The default grid of decode batch sizes per release. value: the grid's name (``_grid``).
SGLANG_DECODE_GRID: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since=None, until="0.4.5", value="1,2,4 + 8..160/8", engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.5"),
         source=f"sglang 0.4.3, 0.4.4 {_RUNNER}: [1, 2, 4] + [i * 8 for i in range(1, 21)]; "
         "ROCm (_is_hip) + [i * 8 for i in range(21, 33)]; cut at cuda_graph_max_bs and "
         "req_to_token_pool.size"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.4.5", until="0.4.6", value="1,2,4,8 + 16..160/8 (+ROCm)", engine="sglang",
         introduced_by=_READ.format("0.4.5"), removed_by=_READ.format("0.4.6"),
         source=f"sglang 0.4.5 {_RUNNER}: [1, 2, 4, 8] + list(range(16, 161, 8)); ROCm + "
         "list(range(160, 257, 8))"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.4.6", until="0.4.7", value="1,2,4,8 + 16..160/8 (+81,920 MiB)",
         engine="sglang", introduced_by=_READ.format("0.4.6"), removed_by=_READ.format("0.4.7"),
         source=f"sglang 0.4.6 {_RUNNER}: + list(range(160, 257, 8)) when "
         "get_device_memory_capacity() > 81920 and dp_size == 1"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.4.7", until="0.4.8", value="1,2,4,8 + 16..160/8 (+96 GiB, +180,000 MiB)",
         engine="sglang", introduced_by=_READ.format("0.4.7"), removed_by=_READ.format("0.4.8"),
         source=f"sglang 0.4.7 {_RUNNER}: + range(160, 257, 8) above 96 * 1024, + range(256, "
         "513, 16) above 180 * 1000; cuda_graph_max_bs beyond the grid adds "
         "range(max(capture_bs), cuda_graph_max_bs + 1, 16)"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.4.8", until="0.5.3", value="1,2,4,8 + 16..160/8 (+90 GiB, +160,000 MiB)",
         engine="sglang", introduced_by=_READ.format("0.4.8"), removed_by=_READ.format("0.5.3"),
         source=f"sglang 0.4.8, 0.4.9, 0.4.10, 0.5.1, 0.5.2 {_RUNNER}: the thresholds 90 * 1024 "
         "('H200, H20') and 160 * 1000 ('B200, MI300'); the same append; 0.4.10 keeps "
         "multiples of the attention TP size where require_gathered_buffer (DP attention)"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.5.3", until="0.5.10", value="1,2,4,8,12 + 16..256/8 + 272..496/16 + 512../32",
         engine="sglang", introduced_by=_READ.format("0.5.3"), removed_by=_READ.format("0.5.10"),
         source="sglang 0.5.3, 0.5.9 server_args.py ServerArgs._generate_cuda_graph_batch_sizes "
         "(non-speculative, padding on): [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, "
         "16) + range(512, cuda_graph_max_bs + 1, 32), cut at cuda_graph_max_bs; "
         f"{_RUNNER} keeps it"),
    Rule(name="sglang_decode_graph_grid", changes="CUDA graphs: decode batch sizes",
         since="0.5.10", until=None, value="0.5.3's grid, max_bs appended",
         engine="sglang", introduced_by=_READ.format("0.5.10"),
         source="sglang 0.5.10 server_args.py _generate_cuda_graph_batch_sizes: 'if "
         "self.cuda_graph_max_bs not in capture_bs: capture_bs.append(self.cuda_graph_max_bs)'; "
         "0.5.19 arg_groups/cuda_graph_hook.py the same grid"),
)

# What a decode capture keeps of its logits. value: "per graph" (a new fp32 [bs, vocab] tensor
# made in each capture and kept as the graph's output) or "shared buffer" (one fp32 [max_bs,
# vocab] tensor allocated before capturing, which every graph writes into).
SGLANG_GRAPH_LOGITS: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_logits", changes="CUDA graphs: the logits each graph keeps",
         since=None, until="0.5.1", value="per graph", engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.5.1"),
         source="sglang 0.4.3 – 0.4.10 layers/logits_processor.py LogitsProcessor._get_logits: "
         "logits = logits[:, : self.config.vocab_size].float(); cuda_graph_runner.py "
         "CudaGraphRunner.capture: self.output_buffers[bs] = output_buffers"),
    Rule(name="sglang_decode_graph_logits", changes="CUDA graphs: the logits each graph keeps",
         since="0.5.1", until=None, value="shared buffer", engine="sglang",
         introduced_by=_READ.format("0.5.1"),
         source="sglang 0.5.1 cuda_graph_runner.py CudaGraphRunner.__init__: "
         "next_token_logits_buffer = torch.zeros((max_num_token, vocab_size), "
         "dtype=torch.float); logits_processor.py _copy_logits_to_buffer (0.5.9 "
         "input_buffers.py, 0.5.19 runner/base_runner.py)"),
)

# DP attention keeps only multiples of the attention TP size (``mul_base``). value: whether.
SGLANG_GRAPH_DP_MULTIPLES: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_dp_multiples", changes="CUDA graphs: decode batch sizes",
         since=None, until="0.4.10", value=False, engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.10"),
         source=f"sglang 0.4.9 {_RUNNER}: no filter for DP attention (only two-batch overlap's)"),
    Rule(name="sglang_decode_graph_dp_multiples", changes="CUDA graphs: decode batch sizes",
         since="0.4.10", until=None, value=True, engine="sglang",
         introduced_by=_READ.format("0.4.10"),
         source=f"sglang 0.4.10, 0.5.9 {_RUNNER}: mul_base *= get_attention_tp_size() where "
         "require_gathered_buffer(server_args); capture_bs = [bs for bs in capture_bs if bs % "
         "mul_base == 0]"),
)

# Whether the decode graphs are captured after the prefill (piecewise) CUDA graphs, into the same
# process-wide graph pool, and whether the decode logits buffer is then the prefill runner's.
# value: (decode after prefill, logits buffer allocated by the first runner that asks, one capture
# stream for every runner: the stream's cuBLAS workspace made by the first capture).
SGLANG_DECODE_AFTER_PREFILL: tuple[Rule, ...] = (
    Rule(name="sglang_decode_after_prefill_graphs", changes="CUDA graphs: capture order",
         since=None, until="0.5.14", value=(False, False, False), engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.5.14"),
         source="sglang 0.5.10, 0.5.12, 0.5.13 model_executor/model_runner.py initialize: "
         "init_device_graphs() (the decode CudaGraphRunner) before init_piecewise_cuda_graphs()"),
    Rule(name="sglang_decode_after_prefill_graphs", changes="CUDA graphs: capture order",
         since="0.5.14", until="0.5.16", value=(True, False, False), engine="sglang",
         introduced_by=_READ.format("0.5.14"), removed_by=_READ.format("0.5.16"),
         source="sglang 0.5.14 model_executor/model_runner.py: 'cuda-graph capture: prefill "
         "before decode'; every runner backend captures into the one global graph pool "
         "(runner_utils/pool.py get_or_create_global_graph_memory_pool)"),
    Rule(name="sglang_decode_after_prefill_graphs", changes="CUDA graphs: capture order",
         since="0.5.16", until="0.5.19", value=(True, True, False), engine="sglang",
         introduced_by=_READ.format("0.5.16"), removed_by=_READ.format("0.5.19"),
         source="sglang 0.5.16, 0.5.18 model_runner_components/cuda_graph_setup.py "
         "capture_cuda_graphs: prefill before decode into the global graph pool; "
         "graph_shared_output.py GraphSharedOutput: one (max decode rows, vocab) fp32 logits "
         "buffer shared by every graph runner, allocated by the first that asks "
         "(prefill_cuda_graph_runner.py _next_token_logits_buffer, captured first); the decode "
         "runner captures under graph_capture() with no stream: distributed/parallel_state.py "
         "GroupCoordinator.graph_capture makes a new one (0.5.14 - 0.5.18: the prefill runner "
         "too), so its live sets cannot take the prefill's freed blocks (torch "
         "CUDACachingAllocator.cpp get_free_block reuses a block only on its stream)"),
    Rule(name="sglang_decode_after_prefill_graphs", changes="CUDA graphs: capture order",
         since="0.5.19", until=None, value=(True, True, True), engine="sglang",
         introduced_by=_READ.format("0.5.19"),
         source="sglang 0.5.19 runner_utils/pool.py get_or_create_global_graph_capture_stream "
         "('every capture pass reserves the pool's scratch once instead of per stream'), used "
         "by decode_cuda_graph_runner.py and prefill_cuda_graph_runner.py; "
         "model_runner_components/cuda_graph_setup.py "
         "capture_cuda_graphs: prefill before decode into the global graph pool; "
         "graph_shared_output.py GraphSharedOutput: one (max decode rows, vocab) fp32 logits "
         "buffer shared by every graph runner, allocated by the first that asks "
         "(prefill_cuda_graph_runner.py _next_token_logits_buffer, captured first)"),
)

# Whether the decode graphs hold the lm_head GEMM and its TP gather (the logits processor runs
# inside the captured forward). value: True in every release read.
SGLANG_GRAPH_LM_HEAD: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_lm_head", changes="CUDA graphs: the lm_head output in the pool",
         since=None, until=None, value=True, engine="sglang", introduced_by="before 0.4.3",
         source="sglang 0.4.3, 0.5.1, 0.5.10, 0.5.19 layers/logits_processor.py "
         "LogitsProcessor._get_logits: logits = torch.matmul(hidden_states, "
         "lm_head.weight.T) (0.5.10: _compute_lm_head), tensor_model_parallel_all_gather(logits) "
         "at TP > 1 (distributed/parallel_state.py GroupCoordinator.all_gather: torch.empty((world_"
         "size,) + input_size), all_gather_into_tensor, movedim(0, dim).reshape), then the fp32 "
         "logits (.float() to 0.4.10, _copy_logits_to_buffer from 0.5.1); the model classes' "
         "forward returns self.logits_processor(...), inside CudaGraphRunner's captured run_once"),
)

SGLANG_GRAPH_ORDER: tuple[Rule, ...] = (
    Rule(name="sglang_decode_graph_order", changes="CUDA graphs: capture order",
         since=None, until="0.4.4", value="ascending", engine="sglang",
         introduced_by="before 0.4.3", removed_by=_READ.format("0.4.4"),
         source="sglang 0.4.3 cuda_graph_runner.py CudaGraphRunner.capture: for bs in "
         "self.capture_bs"),
    Rule(name="sglang_decode_graph_order", changes="CUDA graphs: capture order",
         since="0.4.4", until=None, value="largest first", engine="sglang",
         introduced_by=_READ.format("0.4.4"),
         source="sglang 0.4.4 (to 0.5.19) cuda_graph_runner.py CudaGraphRunner.capture: "
         "reversed(self.capture_bs)"),
)


def _grid_sizes(name: str, gpu_mib: float, amd: bool, dp: int, max_bs: int) -> list[int]:
    """The default grid ``name`` (a value of ``SGLANG_DECODE_GRID``) before the cuts."""
    if name.startswith("1,2,4 +"):
        return [1, 2, 4, *range(8, 161, 8)] + (list(range(168, 257, 8)) if amd else [])
    if name.startswith("1,2,4,8 +"):
        grid = [1, 2, 4, 8, *range(16, 161, 8)]
        if ("ROCm" in name and amd) or ("81,920" in name and gpu_mib > 81920 and dp == 1):
            grid += list(range(160, 257, 8))
        elif "96 GiB" in name or "90 GiB" in name:
            big, huge = (96 * 1024, 180_000) if "96 GiB" in name else (90 * 1024, 160_000)
            grid += list(range(160, 257, 8)) if gpu_mib > big else []
            grid += list(range(256, 513, 16)) if gpu_mib > huge else []
        return grid
    return [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16),
            *range(512, max_bs + 1, 32)]


def decode_capture_sizes(dep: DeploymentView, gpu: GPU, gpu_mib: float, max_bs: int,
                         max_requests: int | None) -> list[int]:
    """The batch sizes SGLang captures at ``dep.engine_version``, in capture order.

    ``gpu_mib``: the total SGLang's heuristics read (nvidia-smi's); ``max_bs``: the resolved
    ``--cuda-graph-max-bs``; ``max_requests``: ``--max-running-requests`` where given (the
    request pool's rows; None: the default pool, which is larger than every default grid)."""
    version = dep.engine_version
    name = str(value_at(SGLANG_DECODE_GRID, version, SGLANG_DECODE_GRID[-1].value,
                        engine="sglang"))
    sizes = _grid_sizes(name, gpu_mib, gpu.vendor == "amd", dep.dp, max_bs)
    if max_requests is not None and max(sizes) > max_requests:
        sizes.append(max_requests)
    if dep.enable_dp_attention and value_at(SGLANG_GRAPH_DP_MULTIPLES, version, True,
                                            engine="sglang"):
        attn_tp = max(1, dep.tp // max(1, dep.dp))
        sizes = [b for b in sizes if b % attn_tp == 0] or sizes
    sizes = [b for b in sizes if b <= max_bs]
    appends = "(+96 GiB" in name or "(+90 GiB" in name
    if appends and sizes and max(sizes) < max_bs:
        sizes += list(range(max(sizes), max_bs + 1, 16))
    if name.endswith("appended") and max_bs not in sizes:
        sizes.append(max_bs)
    if max_requests is not None:
        sizes = [b for b in sizes if b <= max_requests]
    sizes = sorted(set(sizes)) or [max_bs]
    order = value_at(SGLANG_GRAPH_ORDER, version, "largest first", engine="sglang")
    return sizes if order == "ascending" else sizes[::-1]


def kept_logits(dep: DeploymentView, sizes: list[int],
                vocab: int) -> tuple[tuple[int, ...], int, str]:
    """The logits the capture keeps: (fp32 tensors kept in the graph pool, in capture order;
    bytes of the shared buffer allocated before capturing; what the formula says)."""
    how = value_at(SGLANG_GRAPH_LOGITS, dep.engine_version, "shared buffer", engine="sglang")
    if how == "per graph":
        kept = tuple(b * vocab * 4 for b in sizes)
        return kept, 0, f"each graph's fp32 logits [bs, {vocab:,}] kept in the pool"
    return (), max(sizes) * vocab * 4, f"one fp32 logits buffer [{max(sizes)}, {vocab:,}]"


def stage_outputs_kept(sizes: list[int], hidden: int,
                       act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str]:
    """What each decode graph keeps on a pipeline stage that is not the last: its output is the
    ``PPProxyTensors`` of the stage's last layer, hidden_states and residual [bs, hidden] in the
    model dtype, made inside the capture and kept as ``output_buffers[bs]`` (sglang 0.4.10,
    0.5.9 models/llama.py ``forward``: ``if not self.pp_group.is_last_rank: return
    PPProxyTensors({"hidden_states": ..., "residual": ...})``; cuda_graph_runner.py ``capture``
    keeps every ``run_once`` output), in every release: no logits are made there, neither the
    fp32 logits kept per graph through 0.4.10 nor a copy into the buffer from 0.5.1."""
    kept = tuple((b * hidden * act_bytes,) * 2 for b in sizes)
    return kept, "each graph's hidden_states and residual [bs, hidden] kept in the pool (PP)"


def lm_head_stages(dep: DeploymentView, vocab: int, hidden: int, bs: int,
                   act_bytes: int) -> tuple[tuple[tuple[int, ...], ...], str]:
    """The decode live sets of the logits processor at batch ``bs`` after the last layer
    (``SGLANG_GRAPH_LM_HEAD``), as block sizes in allocation order, and the formula's words:
    the final norm's output [bs, hidden] with the lm_head output [bs, padded vocab / tp] (the
    vocabulary padded to 64, ``ParallelLMHead``'s default, then split by TP), and at TP > 1 the
    all-gather's [tp, bs, padded / tp] output and its reshaped copy [bs, padded]; then the copy
    alone, beside which the fp32 logits are made (the last stage: ``kept_logits``'s tensor is
    allocated in it). Not modelled: DP attention's gathered hidden states and the attention-TP
    gather [approximation: the TP path]."""
    if not value_at(SGLANG_GRAPH_LM_HEAD, dep.engine_version, True, engine="sglang"):
        return (), ""
    padded = -(-vocab // LM_HEAD_VOCAB_PADDING) * LM_HEAD_VOCAB_PADDING
    tp = max(1, dep.tp)
    norm, local = bs * hidden * act_bytes, bs * (padded // tp) * act_bytes
    if tp == 1:
        return ((norm, local),), f"the lm_head output [{bs}, {padded:,}]"
    whole = bs * padded * act_bytes
    return ((norm, local, whole, whole), (norm, whole)), (
        f"the lm_head output [{bs}, {padded // tp:,}], its TP all-gather [{tp}, {bs}, "
        f"{padded // tp:,}] and reshaped copy [{bs}, {padded:,}]")


def after_prefill(version: str | None) -> tuple[bool, bool, bool]:
    """(the decode graphs follow the prefill graphs into the same pool, the logits buffer is
    allocated by the prefill runner, both capture on one stream) at ``version``:
    ``SGLANG_DECODE_AFTER_PREFILL``."""
    value = value_at(SGLANG_DECODE_AFTER_PREFILL, version, (True, True, True), engine="sglang")
    after, shared, stream = cast("tuple[bool, bool, bool]", value)
    return bool(after), bool(shared), bool(stream)


RULES: tuple[tuple[Rule, ...], ...] = (SGLANG_DECODE_GRID, SGLANG_GRAPH_LOGITS,
                                       SGLANG_GRAPH_LM_HEAD, SGLANG_GRAPH_ORDER,
                                       SGLANG_GRAPH_DP_MULTIPLES, SGLANG_DECODE_AFTER_PREFILL)
"""The rows of this module (``memprof versions`` lists them with the engine's)."""
