"""vLLM's speculative decoding methods memprof models, and what each one changes.

The method (``--speculative-config``'s ``method``; memprof's ``--speculative-method``) decides
what the drafter adds to a rank; the draft token count k (``num_speculative_tokens``) decides
what every method adds to the target's runner (read in the 0.30.0 wheel,
v1/worker/gpu_model_runner.py, and memprof's terms that read k):

- the uniform decode batch is 1 + k tokens a request (``VllmConfig.uniform_decode_query_len``):
  the CUDA-graph capture sizes (config/vllm.py ``_set_cudagraph_sizes``: the largest is
  ``min(max_num_seqs × (1 + k) × 2, 512)``; memprof/core/terms/cudagraph.py ``v1_dql``);
- the profile run's sampler warm-up runs the ``RejectionSampler`` after the sampler
  (``_dummy_sampler_run``: logits of [R + R, V], one dummy draft token a request; with the
  default greedy draft no draft probabilities; memprof/core/terms/activation.py
  ``sampler_stage``);
- Model Runner V2's ``StructuredOutputsWorker`` sizes its bitmask by R × (1 + k)
  (memprof/core/engines/vllm_runner.py ``sampler_state_tensors``) and keeps ``draft_tokens``
  [R, k] (memprof/core/terms/runner_buffers.py).

What the method adds beside that:

- ``mtp``: multi-token prediction: the checkpoint's own MTP layer (DeepSeek-style
  ``num_nextn_predict_layers``; Qwen3.5 / 3.6 ``mtp_num_hidden_layers``, vLLM's
  ``qwen3_5_mtp``) is loaded, its weights and its KV cache join the pool
  (memprof/core/models: ``speculative_mtp``; the family modules say what the block holds);
- ``ngram``: prompt lookup, no weights and no KV layer. To 0.31.x on the CPU (0.30.0
  v1/spec_decode/ngram_proposer.py ``NgramProposer``: numpy and numba, no GPU tensor; the
  runner's GPU buffers of ``ngram_gpu`` are made only for that method), in the V1 runner: Model
  Runner V2 has no n-gram drafter there and the release falls back to V1
  (memprof/core/engines/vllm_runner.py ``V2_FALLBACK_SPECULATIVE``). From 0.32.0 V2 drafts it
  on the GPU (``NgramGPUSpeculator``): a dense [R, max_model_len] token table and the scan's
  buffers (memprof/core/terms/ngram_speculator.py);
- ``eagle`` / ``eagle3``: an EAGLE / EAGLE-3 draft head, a small model of its own named by
  ``--speculative-config``'s ``model`` (memprof's ``--speculative-model``: the head's
  config.json, memprof/core/models/draft_head.py): its weights load with the target's, its
  decoder layer's KV joins the pool and the proposer keeps buffers of its own
  (memprof/core/terms/draft_head.py). Both runners draft with it (V1's ``EagleProposer``,
  Model Runner V2's ``EagleSpeculator``: neither method is on V2's unsupported list), from
  0.8.5 on the V1 engine (0.8.0 - 0.8.4 fall back to V0 for "Eagle":
  memprof/core/engines/vllm.py ``v1_fallback_eagle``).
"""

from __future__ import annotations

from memprof.base.errors import BadInput

SPECULATIVE_METHODS = ("mtp", "ngram", "eagle", "eagle3")
"""The ``--speculative-method`` values memprof models (vLLM's ``SpeculativeConfig.method``
names; ``deepseek_mtp`` and the other ``*_mtp`` names are ``mtp``)."""

MTP = "mtp"
NGRAM = "ngram"
HEAD_METHODS = ("eagle", "eagle3")
"""The methods whose drafter is a head of its own, named by ``--speculative-model``."""


# vLLM's ``SpeculativeMethod`` beside the ``*_mtp`` names (0.30.0 config/speculative.py: the
# Literal's members; every MTP model type ends in "_mtp" or is "mtp")
VLLM_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class",
                "eagle", "eagle3", "extract_hidden_states", "dflash", "ngram_gpu", "dspark")


def vllm_method(conf: dict[str, object]) -> str:
    """The method vLLM reads from a ``--speculative-config`` object: its ``method``, or where it
    gives none, "ngram" for the ``model`` "ngram" / "[ngram]" (the older form; 0.30.0
    config/speculative.py ``SpeculativeConfig.__post_init__``), else "draft_model" (a draft
    checkpoint, whose type vLLM reads from its config: not modelled either way); "" for neither
    key."""
    method = conf.get("method")
    if method is not None:
        return str(method)
    model = conf.get("model")
    if model is None:
        return ""
    return NGRAM if model in ("ngram", "[ngram]") else "draft_model"


def known_to_vllm(method: str) -> bool:
    """Is ``method`` one of vLLM's speculative methods (``VLLM_METHODS`` or an MTP type)?"""
    return method in VLLM_METHODS or method == MTP or method.endswith("_mtp")


def method_of(vllm_name: str) -> str | None:
    """memprof's method for a ``--speculative-config`` method as vLLM names it
    (``deepseek_mtp``, ``qwen3_next_mtp``, ``mtp``: ``mtp``; ``ngram``, ``eagle``, ``eagle3``),
    or ``None`` for a method memprof does not model (``draft_model``, ``medusa``, ``suffix``,
    ``ngram_gpu``, ...)."""
    if vllm_name == MTP or vllm_name.endswith("_mtp"):
        return MTP
    return vllm_name if vllm_name in (NGRAM, *HEAD_METHODS) else None


def speculative_settings(conf: dict[str, object]) -> tuple[dict[str, object], str | None]:
    """The deployment settings of a ``--speculative-config`` object (``num_speculative_tokens``
    and, but for MTP, ``speculative_method``; for EAGLE / EAGLE-3 the head, its ``model``, as
    ``speculative_model``), or ({}, why) for a method memprof does not model; :class:`BadInput`
    for a method vLLM does not have."""
    method = vllm_method(conf)
    if method and not known_to_vllm(method):
        raise BadInput(f"--speculative-config method {method[:40]!r} is not one of vLLM's "
                       "speculative methods",
                       hint='e.g. "method": "ngram", "eagle3" or "deepseek_mtp" (memprof also '
                       "reads draft_model, medusa and suffix, and lists them as not modelled)")
    n = conf.get("num_speculative_tokens")
    ours = method_of(method)
    if ours is None or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return {}, f"speculative method {method or '?'}: the draft model's memory"
    if ours == MTP:
        return {"num_speculative_tokens": n}, None
    settings: dict[str, object] = {"num_speculative_tokens": n, "speculative_method": ours}
    if ours in HEAD_METHODS:
        head = conf.get("model")
        if not isinstance(head, str) or not head.strip():
            return {}, f"speculative method {method} without a head (its model)"
        for key, default in HEAD_DEFAULTS.items():
            if conf.get(key, default) != default:
                return {}, (f"speculative method {method} with {key} "
                            f"{str(conf.get(key))[:40]}: the head is sized at vLLM's default")
        settings["speculative_model"] = head
    return settings, None


# The ``--speculative-config`` keys that change an EAGLE head's memory beside ``model`` and
# ``num_speculative_tokens``, at the defaults memprof sizes the head at (0.30.0
# config/speculative.py ``SpeculativeConfig``): ``draft_tensor_parallel_size`` (None: the
# target's TP), ``quantization`` and ``kv_cache_dtype`` (None: the head's own config, the
# target's cache dtype), ``draft_sample_method`` ("greedy": no [R, k, V] draft logits),
# ``parallel_drafting`` (False: P-EAGLE, which Model Runner V2 does not run). Another value is
# listed as not modelled.
HEAD_DEFAULTS: dict[str, object] = {"draft_tensor_parallel_size": None, "quantization": None,
                                    "kv_cache_dtype": None, "draft_sample_method": "greedy",
                                    "parallel_drafting": False}


def check_speculative(method: str, num_speculative_tokens: int,
                      speculative_model: str | None = None) -> None:
    """``--speculative-method``: one of ``SPECULATIVE_METHODS``, with draft tokens to make, and
    ``--speculative-model`` (the head) exactly with an EAGLE method (:class:`BadInput`
    otherwise)."""
    if method not in SPECULATIVE_METHODS:
        raise BadInput(f"--speculative-method {str(method)[:40]!r} is not a method memprof "
                       f"models ({', '.join(SPECULATIVE_METHODS)})",
                       hint="one of: " + ", ".join(SPECULATIVE_METHODS)
                       + " (draft models, Medusa and suffix decoding are not modelled)")
    if method != MTP and not num_speculative_tokens:
        raise BadInput(f"--speculative-method {method} without --num-speculative-tokens: "
                       "no draft token to make", hint="add --num-speculative-tokens, e.g. 4")
    if not num_speculative_tokens:
        if speculative_model is not None:
            raise BadInput("--speculative-model without --num-speculative-tokens: no draft "
                           "token to make", hint="add --num-speculative-tokens and "
                           "--speculative-method eagle3 (or eagle)")
        return
    if method in HEAD_METHODS and not speculative_model:
        raise BadInput(f"--speculative-method {method} without --speculative-model: memprof "
                       "sizes the draft head from its config.json",
                       hint="add --speculative-model with the head's config.json (or the "
                       "folder holding it)")
    if speculative_model is not None and method not in HEAD_METHODS:
        raise BadInput(f"--speculative-model with --speculative-method {method}: only an "
                       "EAGLE method drafts with a head of its own",
                       hint="--speculative-method eagle3 (or eagle), or drop "
                       "--speculative-model")
