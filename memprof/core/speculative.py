"""vLLM's speculative decoding methods memprof models, and what each one changes.

The method (``--speculative-config``'s ``method``; memprof's ``--speculative-method``) decides
what the drafter adds to a rank; the draft token count k (``num_speculative_tokens``) decides
what every method adds to the target's runner (read in the 0.30.0 wheel,
v1/worker/gpu_model_runner.py, and memprof's terms that read k):

- the uniform decode batch is 1 + k tokens a request (``VllmConfig.uniform_decode_query_len``):
  the CUDA-graph capture sizes (config/vllm.py ``_set_cudagraph_sizes``: the largest is
  ``min(max_num_seqs × (1 + k) × 2, 512)``; memprof/core/terms/cudagraph.py ``v1_dql``), and
  the FULL decode sizes (Model Runner V2 from 0.25.0 rounds each capture size up to a multiple
  of 1 + k: cudagraph.py ``V2_FULL_DECODE_SIZES``);
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
  (memprof/core/models: ``speculative_mtp``; the family modules say what the block holds); vLLM
  drafts it with the EAGLE proposer (V1 ``EagleProposer``, Model Runner V2 ``MTPSpeculator``),
  whose buffers memprof/core/terms/draft_head.py charges, and the profile run drafts over its T
  tokens (memprof/core/terms/mtp_drafter.py);
- ``ngram``: prompt lookup, no weights and no KV layer. To 0.31.x on the CPU (0.30.0
  v1/spec_decode/ngram_proposer.py ``NgramProposer``: numpy and numba, no GPU tensor; the
  runner's GPU buffers of ``ngram_gpu`` are made only for that method), in the V1 runner: Model
  Runner V2 has no n-gram drafter there and the release falls back to V1
  (memprof/core/engines/vllm_runner.py ``V2_FALLBACK_SPECULATIVE``). From 0.32.0 V2 drafts it
  on the GPU (``NgramGPUSpeculator``): a dense [R, max_model_len] token table and the scan's
  buffers (memprof/core/terms/ngram_speculator.py);
- ``ngram_gpu``: prompt lookup on the GPU (vLLM PR 29184, first released in 0.18.0: absent
  from 0.17.0's config/speculative.py). From 0.32.0 ``init_speculator`` builds the same V2
  ``NgramGPUSpeculator`` as for ``ngram`` (``use_ngram()`` is true for both), so memprof models
  it as ``ngram`` (``NGRAM_GPU_DRAFTER``). 0.18.0 - 0.31.x run it in the V1 runner as
  ``NgramProposerGPU`` (0.31.0 v1/spec_decode/ngram_proposer_gpu.py): beside the runner's
  [R, max_model_len] int32 ``token_ids_gpu_tensor`` and its pinned index buffers
  (v1/worker/gpu_model_runner.py), a ``torch.compile``'d kernel (Inductor with
  ``max_autotune`` and ``aggressive_fusion``) that the constructor runs three times over
  [R, max_model_len]: the kernel's transient tensors (the windows compared with each suffix,
  per n-gram length) are whatever Inductor's fusion leaves materialised, which no source
  memprof reads gives, so memprof refuses that span;
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
from memprof.core.versions import Rule, rule_in_force

SPECULATIVE_METHODS = ("mtp", "ngram", "ngram_gpu", "eagle", "eagle3")
"""The ``--speculative-method`` values memprof models (vLLM's ``SpeculativeConfig.method``
names; ``deepseek_mtp`` and the other ``*_mtp`` names are ``mtp``)."""

MTP = "mtp"
NGRAM = "ngram"
NGRAM_GPU = "ngram_gpu"
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
    return vllm_name if vllm_name in (NGRAM, NGRAM_GPU, *HEAD_METHODS) else None


# What vLLM drafts ``ngram_gpu`` with, per release (``value``: memprof's method whose drafter it
# is; ``None``: a drafter memprof does not size, refused by ``check_speculative``).
NGRAM_GPU_DRAFTER: tuple[Rule, ...] = (
    Rule(name="ngram_gpu_drafter", changes="speculative method ngram_gpu: its drafter",
         since="0.18.0", until="0.32.0", value=None, applies_to="ngram",
         introduced_by="vLLM PR 29184 (NgramProposerGPU; first released in 0.18.0)",
         removed_by="0.32.0: V2's NgramGPUSpeculator drafts ngram_gpu as ngram",
         generation="v1",
         source="0.18.0 config/speculative.py NgramGPUTypes (absent in 0.17.0); 0.30.0 / 0.31.0 "
         "v1/spec_decode/ngram_proposer_gpu.py NgramProposerGPU: a torch.compile'd "
         "NgramGPUKernel (max_autotune, aggressive_fusion) run by _dummy_run over "
         "[max_num_seqs, max_model_len] in the constructor; v1/worker/gpu_model_runner.py "
         "token_ids_gpu_tensor [max_num_reqs, max_model_len] int32"),
    Rule(name="ngram_gpu_drafter", changes="speculative method ngram_gpu: its drafter",
         since="0.32.0", until=None, value=NGRAM, applies_to="ngram",
         introduced_by="0.32.0: V2's NgramGPUSpeculator drafts ngram_gpu as ngram",
         generation="v1",
         source="0.32.0 / 0.33.0 v1/worker/gpu/spec_decode/__init__.py init_speculator "
         "(speculative_config.use_ngram() branch), config/speculative.py use_ngram: method in "
         "('ngram', 'ngram_gpu')"),
)


def drafting_method(method: str, version: str | None, engine: str = "vllm") -> str:
    """memprof's method whose drafter vLLM builds for ``method`` at ``version``: ``ngram`` for
    ``ngram_gpu`` where ``NGRAM_GPU_DRAFTER`` says so (0.32.0 on), else ``method``."""
    if method != NGRAM_GPU:
        return method
    rule = rule_in_force(NGRAM_GPU_DRAFTER, version, engine) if version else None
    return str(rule.value) if rule is not None and rule.value else method


def is_ngram(method: str, version: str | None, engine: str = "vllm") -> bool:
    """Does vLLM draft ``method`` with the n-gram drafter memprof models (``ngram``, or
    ``ngram_gpu`` from 0.32.0)?"""
    return drafting_method(method, version, engine) == NGRAM


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
                      speculative_model: str | None = None, version: str | None = None,
                      engine: str = "vllm") -> None:
    """``--speculative-method``: one of ``SPECULATIVE_METHODS``, with draft tokens to make, and
    ``--speculative-model`` (the head) exactly with an EAGLE method; ``ngram_gpu`` only where
    memprof sizes its drafter at ``version`` (``NGRAM_GPU_DRAFTER``) (:class:`BadInput`
    otherwise)."""
    if method not in SPECULATIVE_METHODS:
        raise BadInput(f"--speculative-method {str(method)[:40]!r} is not a method memprof "
                       f"models ({', '.join(SPECULATIVE_METHODS)})",
                       hint="one of: " + ", ".join(SPECULATIVE_METHODS)
                       + " (draft models, Medusa and suffix decoding are not modelled)")
    if method == NGRAM_GPU and num_speculative_tokens and version:
        _check_ngram_gpu(version, engine)
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


def _check_ngram_gpu(version: str, engine: str) -> None:
    """Refuse ``ngram_gpu`` where memprof does not size its drafter (``NGRAM_GPU_DRAFTER``)."""
    rule = rule_in_force(NGRAM_GPU_DRAFTER, version, engine)
    if rule is None:
        first = NGRAM_GPU_DRAFTER[0].since
        raise BadInput(f"--speculative-method ngram_gpu at {engine} {version}: vLLM has the "
                       f"method from {first} only", hint=f"use --engine-version {first} or "
                       "later, or --speculative-method ngram")
    if rule.value is None:
        raise BadInput(f"--speculative-method ngram_gpu at vLLM {version}: its V1 "
                       "NgramProposerGPU runs a torch.compile'd kernel over [max_num_seqs, "
                       "max_model_len] whose transient tensors Inductor's fusion decides, which "
                       "memprof does not size (memprof/core/speculative.py)",
                       hint="use --speculative-method ngram (the CPU drafter before 0.32.0), or "
                       f"--engine-version {NGRAM_GPU_DRAFTER[1].since} or later, where "
                       "ngram_gpu drafts as ngram")
