"""What ``--enable-lora`` adds to vLLM's profile run (memprof/core/terms/lora.py
``lora_logits_widths``, read in the 0.8.2 wheel), against hand counts: the sampler warm-up's
logits grow by the extra vocabulary; the dummy LoRAs (CPU) and the punica kernels' buffers add
nothing to the peak."""

from __future__ import annotations

from memprof.core.deployment import Deployment
from memprof.core.estimate import estimate
from memprof.core.gpus import resolve_gpu

# row 951 ran V1 with --enable-lora, which 0.8.0-0.8.2 gives only under VLLM_USE_V1=1 (V0
# otherwise: engines/vllm.py V1_FALLBACK, v1_fallback_lora)
ROW_951 = dict(engine_version="0.8.2", vllm_use_flashinfer_sampler=1, vllm_use_v1=1)
LORA = dict(enable_lora=True, max_loras=2, max_lora_rank=16)


def _peak(model: str, dep: Deployment, gpu: str = "A100-40GB") -> int:
    e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
    (c,) = [c for c in e.ranks[0].components if c.name == "activation peak (profile run)"]
    return c.bytes


def test_row_951_sampler_logits_carry_the_extra_vocabulary() -> None:
    """Llama-3.1-8B at 0.8.2 (V1, FlashInfer sampler), max_loras 2, rank 16: R = 1,024 rows
    (max_num_seqs 1024 < 2,048 batched tokens). lm_head is ParallelLMHead(128,256 + 256) padded
    to 256: 128,512 columns in bf16; LogitsProcessorWithLoRA returns logits[:, :128,512]; the
    sampler's fp32 logits, fp32 probs and FlashInfer's top-k-renormed probs (12 B an element)
    are [1,024, 128,512]. So the sampler stage, which sets the peak, grows by
    1,024 × 256 × (2 + 12) B = 3.5 MiB."""
    base = _peak("llama-3.1-8b", Deployment(**ROW_951))
    lora = _peak("llama-3.1-8b", Deployment(**ROW_951, **LORA))
    assert lora - base == 1024 * 256 * (2 + 12) == 3_670_016
    # the sampler stage itself, by hand: [R, H] bf16 (0.8.x keeps only the last rows:
    # activation.V1_SAMPLER_HIDDEN) + [R, 128512] bf16 + 12 B × [R, 128512]
    assert lora == 1024 * 4096 * 2 + 1024 * 128512 * 2 + 1024 * 128512 * 12


def test_no_extra_vocabulary_no_change() -> None:
    """Qwen3-0.6B at 0.11.0: its class has no LoRA embedding modules and no extra vocabulary,
    so the logits stay [R, V] and the peak does not move; at 0.12.0 lora_extra_vocab_size is
    gone, so Llama's does not either."""
    qwen = dict(engine_version="0.11.0")
    assert (_peak("qwen3-0.6b", Deployment(**qwen, enable_lora=True))
            == _peak("qwen3-0.6b", Deployment(**qwen)))
    new = dict(engine_version="0.12.0")
    assert (_peak("llama-3.1-8b", Deployment(**new, **LORA))
            == _peak("llama-3.1-8b", Deployment(**new)))



def _graph_pool(model: str, dep: Deployment, gpu: str = "A100-40GB") -> int:
    e = estimate(model, dep, gpu=resolve_gpu(gpu, None))
    return sum(c.bytes for c in e.ranks[0].components if c.category == "cudagraph")


def test_row_951_graph_capture_adds_the_punica_kernel_nodes() -> None:
    """0.8.2 punica_gpu.py add_lora_linear: per LoRA linear a torch.zeros fill, one
    lora_shrink and one lora_expand launch (3 kernel nodes); Llama has 4 LoRA linears a layer
    (qkv_proj, o_proj, gate_up_proj, down_proj), 32 layers, and the LoRA embedding's gather and
    expand (2) in the first piece. The log's 67 capture sizes (512 … 1), each node at the CUDA
    12.x drivers' ~10 KiB (memprof.core.terms.cudagraph DRIVER_STACK): 67 × 386 × 10 KiB."""
    base = _graph_pool("llama-3.1-8b", Deployment(**ROW_951))
    lora = _graph_pool("llama-3.1-8b", Deployment(**ROW_951, **LORA))
    assert lora - base == 67 * (32 * 4 * 3 + 2) * 10 * 1024 == 264_826_880


def test_graph_nodes_need_a_read_release() -> None:
    """At 0.8.0 and 0.8.1 memprof has not read LoRA's captured kernels: no nodes are charged
    (no row of the rule holds there; 0.7.x's are read: tests/test_lora_graph_nodes_v07.py),
    and a model without LoRA is unchanged at every release."""
    old = dict(engine_version="0.8.1", vllm_use_v1=1)  # V1, as 0.8.1 runs LoRA under it
    assert (_graph_pool("llama-3.1-8b", Deployment(**old, **LORA))
            == _graph_pool("llama-3.1-8b", Deployment(**old)))
