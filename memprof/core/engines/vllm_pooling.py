"""vLLM's pooling runner: an embedding model served with ``--runner pooling --convert embed``
(before 0.13.0 also ``--task embed``), and what it changes in the memory budget.

Read in the 0.11.0, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.18.0 and 0.20.0 wheels, and for the
runner each release gives a pooling model in the 0.21.0 to 0.33.0 wheels (0.21.0, 0.22.0, 0.23.0,
0.24.0, 0.25.0, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0):

1. The flags. ``--runner {auto,generate,pooling,draft}`` and ``--convert
   {auto,none,embed,classify,reward}`` arrive in 0.10.1 (0.10.0 engine/arg_utils.py has only
   ``--task``); ``--task`` stays, deprecated, through 0.12.x (0.11.0 config/model.py
   ``_task_to_convert``: 'embedding' and 'embed' map to ``--convert embed``, 'score' to embed
   for a model that is no cross-encoder) and is gone in 0.13.0 (engine/arg_utils.py adds no
   ``--task``).
2. The weights. ``as_embedding_model`` (model_executor/models/adapters.py) drops the lm_head:
   0.11.0 ``_create_pooling_model_cls.__init__`` deletes the ``lm_head`` and ``logits_processor``
   attributes after building the model and skips ``lm_head.*`` at load; 0.33.0 builds it as a
   ``StageMissingLayer`` (``no_init_weights`` over ``ParallelLMHead``). A tied lm_head is the
   input embedding, which stays (``POOLING_DROPS_LM_HEAD``).
3. The profile run. ``profile_run`` calls ``_dummy_pooler_run(hidden_states)`` instead of
   ``_dummy_sampler_run`` (v1/worker/gpu_model_runner.py): no [R, V] logits and no sampler. The
   pooler runs each supported task on the [T, H] hidden states split over R requests, then the
   task of the largest output again (``pooler_parts``): ``embed`` (LAST pooling: R rows gathered,
   cast to the fp32 head dtype, normalised) and, where the release keeps it under chunked
   prefill, the token-level task (``POOLER_TOKEN_TASK``). ``_dummy_run``'s
   ``hidden_states[logit_indices]`` [R, H] stays alive beside it (``profile_run``'s
   ``last_hidden_states``). The V1 runner's ``_dummy_pooler_run`` / ``_dummy_pooler_run_task``
   are the same code in every wheel from 0.20.0 to 0.33.0.
4. The KV cache. A decoder-only embedding model keeps its KV cache. With LAST pooling (the
   default of a converted ``*ForCausalLM``) chunked prefill and prefix caching stay on (0.11.0
   engine/arg_utils.py ``_set_default_args``: ``incremental_prefill_supported``; 0.12.0 and
   0.20.0 config/model.py ``is_chunked_prefill_supported``), so the batch defaults are a
   generation model's.
5. CUDA graphs. "Pooling models do not support full cudagraphs": PIECEWISE only
   (``POOLING_GRAPH_MODE``).
6. Which runner (``POOLING_ON_V2``). Model Runner V2 takes a pooling model by default from
   0.29.0 only: 0.21.0 runs V2 only under ``VLLM_USE_V2_MODEL_RUNNER=1``, and 0.22.0-0.28.0's
   ``_is_default_v2_model_runner_model`` (config/vllm.py) returns False for a ``runner_type``
   other than "generate", before any listed architecture; 0.29.0-0.33.0's
   ``use_v2_model_runner`` drops that check and ``_get_v2_model_runner_unsupported_features``
   names no pooling entry.
7. Model Runner V2's pooling path (0.29.0-0.33.0 v1/worker/gpu/model_runner.py, the same
   ``pool/pooling_runner.py`` dummy run in each): ``load_model`` builds no ``Sampler``,
   ``PromptLogprobsWorker`` or ``StructuredOutputsWorker`` for a pooling model (``if
   self.is_last_pp_rank and not self.is_pooling_model``), so V2's sampler state is not made;
   ``profile_run`` calls ``_dummy_pooler_run(hidden_states)`` → ``PoolingRunner.
   dummy_pooler_run``, which runs each task of ``pooler.get_supported_tasks()`` ∩
   {embed, classify, token_embed, token_classify, embed&token_classify} once (embed and
   token_embed for an embedding model, with or without chunked prefill), discarding each output,
   with no GPU token ids (``prompt_token_ids_cpu`` only where a task requires token ids) and the
   T % R extra tokens spread one each over the last requests. ``_dummy_run``'s
   ``sample_hidden_states`` [R, H] stays alive beside it. ``__init__`` still makes
   ``output_copy_stream`` (memprof/core/terms/stream_pool.py), and the CUDA graphs are V2's own
   estimate of PIECEWISE graphs only (item 5; memprof/core/terms/runner_v2_graphs.py).
8. A bare decoder (``MistralModel``: a decoder saved without its lm_head) is sized on this runner
   only (``check_pooling``; memprof/core/models/families ``is_bare_decoder`` says why).
9. ``--convert classify`` (cross-encoders, rerankers, classifiers and the reward models saved
   as ``*ForSequenceClassification``), read in 0.11.0, 0.13.0, 0.20.0 and 0.33.0
   model_executor/models/adapters.py ``as_seq_cls_model``: the converted causal LM without its
   lm_head (item 2) plus a score head ``ReplicatedLinear(H, num_labels, bias=False)`` built by
   ``_init_pooler`` in ``__init__``, so on every rank, TP and PP alike, in fp32 (0.11.0
   ``params_dtype=torch.float32``; 0.13.0, 0.20.0 and 0.33.0
   ``params_dtype=model_config.head_dtype``,
   fp32 on the pooling runner: config/model.py ``_get_head_dtype``) (``SCORE_HEAD``).
   num_labels: memprof/core/models/score_heads.py ``score_labels``. A reranker converted online
   from its lm_head (``classifier_from_token`` + ``method``: Qwen3-Reranker's
   ``from_2_way_softmax``, bge-reranker-v2-gemma's ``no_post_processing``) builds a
   ``ParallelLMHead`` [V/tp, H] inside ``load_weights``, copies its rows into the score head and
   deletes it before the load returns (``load_weights_using_from_2_way_softmax``,
   ``load_weights_no_post_processing``), so "Model loading took" (the allocated bytes after the
   load, v1/worker/gpu_model_runner.py ``load_model``) does not hold it, and the profile's peak
   is reset after it (utils/mem_utils.py ``memory_profiling``).
   The pooler (0.33.0 model_executor/layers/pooler/special.py ``DispatchPooler.for_seq_cls``;
   0.13.0 adapters.py ``DispatchPooler({"token_classify", "classify", "score"})``, 0.11.0
   ``{"encode", "classify", "score"}``; ``score`` is classify with another activation):
   ``classify`` (LAST pooling: the gathered [R, H], its fp32 copy, then [R, num_labels] logits
   and their activation, seqwise/heads.py ``ClassifierPoolerHead``) and the token-level task
   (``token_classify``, where ``POOLER_TOKEN_TASK`` runs it: each request's fp32 copy, kept
   [t, num_labels] logits, tokwise/heads.py ``TokenClassifierPoolerHead``). Chunked prefill,
   prefix caching and the batch defaults are item 4's (LAST pooling, a decoder); the graphs
   item 5's; the runner item 6's (``runner_type`` "pooling" whatever the conversion).
   Under ``--runner auto`` / ``--convert auto`` vLLM resolves a ``*ForSequenceClassification``
   to the pooling runner and ``classify`` by its suffix (config/model.py
   ``_get_default_runner_type`` / ``_get_default_convert_type`` over ``_SUFFIX_TO_DEFAULTS``,
   0.11.0, 0.20.0, 0.33.0): ``architecture_defaults``.

[not modelled] With ``--async-scheduling`` (off by default for a pooling model: config/vllm.py
"Disabling asynchronous scheduling by default for pooling model", 0.20.0-0.33.0), 0.28.0's
``AllPool`` clones every request's hidden states (``clone_finished``) in the token_embed task.

[approximation] At 0.11.0 the lm_head is allocated while the model is built and freed before the
weights load (``delattr``), and an online-converted reranker's lm_head (item 9) lives only inside
the load; memprof's replay of the model load (terms/load_rounding.py) leaves both out, so the
freed block's place in the allocator is not replayed.

[not modelled, refused] ``--convert reward`` (0.10.1-0.15.x ``as_reward_model``: every token's
hidden state, ALL pooling, no head); a quantised checkpoint with a score head (0.11.0 passes the
checkpoint's ``quant_config`` to the score head, 0.20.0 and 0.33.0 too unless it is converted
online); a ``head_dtype`` other than fp32 in the config or ``--hf-overrides``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memprof.base.errors import BadInput
from memprof.core.models.families import is_bare_decoder
from memprof.core.models.score_heads import is_seq_cls, score_labels, seq_cls_method
from memprof.core.versions import Rule, rule_in_force, split_generation, value_at

if TYPE_CHECKING:
    from memprof.core.models import ModelSpec

# "auto" is vLLM's default of each: a *ForCausalLM memprof models resolves to the generation
# runner (0.11.0 config/model.py _get_default_runner_type), as a log's Namespace(...) prints it
RUNNERS = ("auto", "generate", "pooling")
CONVERTS = ("auto", "none", "embed", "classify", "reward")
TASKS = ("auto", "generate", "embed", "embedding", "classify", "score", "reward")

# Where memprof models the pooling runner (item 3-5 of the module docstring read there).
POOLING_RUNNER: tuple[Rule, ...] = (
    Rule(name="vllm_pooling_runner", changes="pooling runner (embedding models)",
         since="0.11.0", until=None, value=True, applies_to="pooling", generation="v1",
         introduced_by="read in 0.11.0 (V1 pooling runner, --runner pooling from 0.10.1)",
         source="0.11.0, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.18.0, 0.20.0 and 0.21.0-0.33.0 "
         "v1/worker/gpu_model_runner.py profile_run (_dummy_pooler_run); 0.29.0-0.33.0 "
         "v1/worker/gpu/model_runner.py profile_run (_dummy_pooler_run → "
         "pool/pooling_runner.py PoolingRunner.dummy_pooler_run)"),
)

# Does Model Runner V2 take a pooling model by default (``vllm_runner.V2_DEFAULT`` then decides)?
# ``value`` False: the V1 runner, whatever V2_DEFAULT gives a generation model.
POOLING_ON_V2: tuple[Rule, ...] = (
    Rule(name="pooling_model_runner_v2", changes="model runner of the profile run (pooling "
         "runner)", since="0.22.0", until="0.29.0", value=False, applies_to="pooling",
         generation="v1",
         introduced_by="0.22.0: _is_default_v2_model_runner_model, generation models only",
         removed_by="0.29.0: use_v2_model_runner without _is_default_v2_model_runner_model",
         source="0.22.0 / 0.23.0 / 0.24.0 / 0.25.0 / 0.26.0 / 0.27.1 / 0.28.0 config/vllm.py "
         "VllmConfig._is_default_v2_model_runner_model ('if model_config.runner_type != "
         "\"generate\": return False')"),
    Rule(name="pooling_model_runner_v2", changes="model runner of the profile run (pooling "
         "runner)", since="0.29.0", until=None, value=True, applies_to="pooling",
         generation="v1",
         introduced_by="0.29.0: Model Runner V2 for every model, pooling ones included",
         source="0.29.0 / 0.30.0 / 0.31.0 / 0.32.0 / 0.33.0 config/vllm.py "
         "VllmConfig.use_v2_model_runner, _get_v2_model_runner_unsupported_features (no "
         "pooling entry); v1/worker/gpu/pool/pooling_runner.py PoolingRunner"),
)

# ``--task`` where the release reads it (0.10.0 has only --task; 0.13.0 drops it).
TASK_FLAG: tuple[Rule, ...] = (
    Rule(name="vllm_task_flag", changes="pooling runner: --task", since=None, until="0.13.0",
         value=True, applies_to="pooling", introduced_by="--task (before 0.10.1 the only way)",
         removed_by="0.13.0 engine/arg_utils.py: no --task",
         source="0.11.0 and 0.12.0 engine/arg_utils.py ('--task', deprecated); 0.11.0 "
         "config/model.py _task_to_convert"),
)
RUNNER_FLAGS: tuple[Rule, ...] = (
    Rule(name="vllm_runner_flags", changes="pooling runner: --runner / --convert",
         since="0.10.1", until=None, value=True, applies_to="pooling",
         introduced_by="--runner and --convert (first released in 0.10.1)",
         source="0.10.1 engine/arg_utils.py ('--runner', '--convert'); 0.10.0 has only --task"),
)

# ``--convert reward`` where the release accepts it (its choices are config/model.py's
# ``ConvertOption``; memprof refuses the conversion either way, naming why).
REWARD_CONVERT: tuple[Rule, ...] = (
    Rule(name="vllm_convert_reward", changes="pooling runner: --convert reward",
         since="0.10.1", until="0.16.0", value=True, applies_to="pooling",
         introduced_by="--convert reward (as_reward_model), with --runner / --convert",
         removed_by="0.16.0 config/model.py: ConvertType is none, embed, classify",
         source="0.11.0, 0.13.0, 0.14.0 and 0.15.0 config/model.py ConvertType (with "
         "'reward'); 0.16.0, 0.20.0 and 0.33.0 the same without it"),
)

# The lm_head of an embedding model converted from a ``*ForCausalLM``: not built / deleted.
POOLING_DROPS_LM_HEAD: tuple[Rule, ...] = (
    Rule(name="pooling_drops_lm_head", changes="weights: lm_head (pooling runner)",
         since="0.11.0", until=None, value=True, applies_to="pooling",
         introduced_by="as_embedding_model (model_executor/models/adapters.py)",
         source="0.11.0 model_executor/models/adapters.py _create_pooling_model_cls: "
         "delattr(self, 'lm_head') and load_weights skipping 'lm_head.'; 0.33.0 the same file: "
         "no_init_weights(targets=(LogitsProcessor, ParallelLMHead))"),
)

# Whether the profile run's pooler warm-up runs the token-level task (ALL pooling: every token's
# hidden state) beside ``embed`` under chunked prefill.
POOLER_TOKEN_TASK: tuple[Rule, ...] = (
    Rule(name="pooler_token_task_in_profile", changes="activation peak: pooler (pooling runner)",
         since="0.11.0", until="0.13.0", value=False, applies_to="pooling", generation="v1",
         introduced_by="get_supported_pooling_tasks drops the ALL-pooling task under chunked "
         "prefill",
         removed_by="0.13.0: get_supported_pooling_tasks keeps token_embed",
         source="0.11.0 v1/worker/gpu_model_runner.py get_supported_pooling_tasks "
         "(supported_tasks.remove('encode') with chunked prefill); 0.12.0 the same with "
         "'token_embed' / 'token_classify'"),
    Rule(name="pooler_token_task_in_profile", changes="activation peak: pooler (pooling runner)",
         since="0.13.0", until=None, value=True, applies_to="pooling", generation="v1",
         introduced_by="0.13.0: get_supported_pooling_tasks keeps token_embed",
         source="0.13.0, 0.14.0, 0.16.0, 0.18.0 and 0.20.0 v1/worker/gpu_model_runner.py "
         "get_supported_pooling_tasks (only 'score' removed); 0.13.0 "
         "model_executor/layers/pooler.py TokenEmbeddingPoolerHead, 0.20.0 "
         "layers/pooler/tokwise/heads.py TokenEmbeddingPoolerHead.forward_chunk "
         "(pooled_data.to(head_dtype), then PoolerNormalize); 0.29.0-0.33.0 "
         "v1/worker/gpu/pool/pooling_runner.py PoolingRunner.get_supported_tasks (Model Runner "
         "V2: embed and token_embed, chunked prefill or not)"),
)

# CUDA graphs of a pooling model.
POOLING_GRAPH_MODE: tuple[Rule, ...] = (
    Rule(name="pooling_cudagraph_mode", changes="CUDA graphs: modes (pooling runner)",
         since="0.11.0", until=None, value="PIECEWISE", applies_to="pooling", generation="v1",
         introduced_by="FULL_AND_PIECEWISE by default except for pooling models (0.11.0)",
         source="0.11.0 config/__init__.py VllmConfig.__post_init__ ('pooling models and "
         "encoder-decoder models do not support full cudagraphs'); 0.12.0, 0.20.0 and 0.33.0 "
         "config/vllm.py ('Pooling models do not support full cudagraphs. Overriding "
         "cudagraph_mode to PIECEWISE.')"),
)

# The score head of ``--convert classify`` (module docstring, item 9): value, its dtype.
SCORE_HEAD: tuple[Rule, ...] = (
    Rule(name="seq_cls_score_head", changes="weights: score head (pooling runner, classify)",
         since="0.11.0", until=None, value="float32", applies_to="pooling",
         introduced_by="as_seq_cls_model (model_executor/models/adapters.py)",
         source="0.11.0 model_executor/models/adapters.py as_seq_cls_model._init_pooler "
         "(ReplicatedLinear(hidden_size, config.num_labels, bias=False, "
         "params_dtype=torch.float32)); 0.13.0, 0.20.0 and 0.33.0 the same file "
         "(params_dtype=model_config.head_dtype: fp32 on the pooling runner, config/model.py "
         "_get_head_dtype)"),
)

# the tables, as ``memprof versions`` lists them (memprof/core/version_diff.py RULEBOOK)
POOLING_RULES = (POOLING_RUNNER, POOLING_ON_V2, TASK_FLAG, RUNNER_FLAGS, REWARD_CONVERT,
                 POOLING_DROPS_LM_HEAD, POOLER_TOKEN_TASK, POOLING_GRAPH_MODE, SCORE_HEAD)

# the head dtype of a pooling model: fp32 (0.11.0 config/model.py _get_head_dtype: "The pooling
# model defaults to using fp32 head")
HEAD_DTYPE_BYTES = 4


def task_runner(task: str) -> tuple[str, str]:
    """(runner, convert) that vLLM's ``--task`` stands for (0.11.0 config/model.py
    ``_task_to_convert``) for a ``*ForCausalLM`` checkpoint that is no cross-encoder (``score``
    is ``classify`` for a ``*ForSequenceClassification``: ``architecture_defaults``)."""
    if task in ("auto", "generate"):
        return "generate", "none"
    if task in ("embed", "embedding", "score"):
        return "pooling", "embed"
    return "pooling", task  # classify, reward


def pooling_convert(runner: str, convert: str | None, task: str | None) -> str | None:
    """The conversion in force: ``None`` for a generation runner, else ``embed`` /
    ``classify`` / ``reward`` (``--convert auto`` under ``--runner pooling`` is ``embed`` for a
    ``*ForCausalLM``: 0.11.0 config/model.py ``_get_default_convert_type``; a
    ``*ForSequenceClassification`` gets ``classify`` from ``architecture_defaults`` first)."""
    if task is not None and task != "auto":
        runner, convert = task_runner(task)
    if runner != "pooling":
        return None
    return convert if convert not in (None, "auto") else "embed"


def architecture_defaults(dep: object, architecture: str) -> dict[str, str | None]:
    """What vLLM resolves for a ``*ForSequenceClassification`` where the deployment leaves the
    runner and conversion to it (module docstring, item 9): ``--runner auto`` (memprof's
    ``generate`` default stands for it: vLLM's default is auto) → pooling, ``--convert auto`` →
    classify, ``--task score`` → classify (0.11.0 ``_task_to_convert``). Empty for another
    architecture, another engine, or a runner / conversion stated otherwise (which
    ``check_pooling`` then refuses)."""
    if getattr(dep, "engine", "vllm") != "vllm" or not is_seq_cls(architecture):
        return {}
    runner = getattr(dep, "runner", "generate")
    convert = getattr(dep, "convert", None)
    task = getattr(dep, "task", None)
    if not _seq_cls_resolves(runner, convert, task):
        return {}
    return {"runner": "pooling", "convert": "classify", **({"task": None} if task else {})}


def _seq_cls_resolves(runner: str, convert: str | None, task: str | None) -> bool:
    """Does vLLM resolve these flags to ``classify`` for a ``*ForSequenceClassification``?"""
    if task not in (None, "auto"):
        return task in ("score", "classify") and convert in (None, "auto")
    return runner in ("auto", "generate", "pooling") and convert in (None, "auto", "classify")


def check_pooling(*, runner: str, convert: str | None, task: str | None, version: str,
                  spec: ModelSpec | None = None, lora: bool = False,
                  engine: str = "vllm", quantised: bool = False) -> None:
    """Refuse what memprof does not model of the pooling runner, naming what it does."""
    bare = spec is not None and is_bare_decoder(spec.architecture)
    seq_cls = spec is not None and is_seq_cls(spec.architecture)
    if engine != "vllm" and bare:  # an embedding model (models.families.is_bare_decoder)
        assert spec is not None
        raise BadInput(f"{spec.architecture} is a decoder saved without its lm_head, an "
                       "embedding model; "
                       "SGLang's embedding server (--is-embedding) is not modelled",
                       hint="use --engine vllm --runner pooling")
    if engine != "vllm" and seq_cls:
        assert spec is not None
        raise BadInput(f"{spec.architecture} is a classification checkpoint (a score head on "
                       "the decoder); SGLang's classification / reward serving is not modelled",
                       hint="use --engine vllm (its pooling runner, --convert classify)")
    if runner not in RUNNERS:
        # vLLM's RunnerOption also has "draft" (a drafter's own runner), which memprof does not
        # model; anything else its argparse refuses
        known = runner == "draft"
        raise BadInput(f"--runner {str(runner)[:40]!r} is not modelled" if known else
                       f"unknown --runner {str(runner)[:40]!r}",
                       hint="use --runner generate (or auto) or --runner pooling")
    if convert is not None and convert not in CONVERTS:
        raise BadInput(f"unknown --convert {str(convert)[:40]!r}",
                       hint="use --convert embed (or none, classify, reward)")
    if task is not None:
        if task not in TASKS:
            raise BadInput(f"unknown --task {str(task)[:40]!r}",
                           hint="use --task embed (or generate, classify, score, reward)")
        if task != "auto" and rule_in_force(TASK_FLAG, version) is None:
            raise BadInput(f"vLLM {version} has no --task (removed in 0.13.0)",
                           hint="use --runner pooling --convert embed")
    if (runner not in ("auto", "generate") or convert not in (None, "auto", "none")
            ) and rule_in_force(RUNNER_FLAGS, version) is None:
        raise BadInput(f"vLLM {version} has no --runner / --convert (first in 0.10.1)",
                       hint="use --task embed")
    conv = ("classify" if seq_cls and _seq_cls_resolves(runner, convert, task)
            else pooling_convert(runner, convert, task))
    if seq_cls and conv != "classify":
        assert spec is not None
        raise BadInput(f"{spec.architecture} is a classification checkpoint: vLLM builds it "
                       "only as --convert classify (registry.py _normalize_arch maps its suffix "
                       "to the causal LM for that conversion alone)",
                       hint="drop --runner / --convert / --task (vLLM resolves them to "
                            "--runner pooling --convert classify), or pass --convert classify")
    if conv is None and bare:
        assert spec is not None
        raise BadInput(f"{spec.architecture} is a decoder saved without its lm_head, an "
                       "embedding model in vLLM's registry; vLLM picks its runner under "
                       "--runner auto from the repository's sentence-transformers files, which "
                       "memprof does not read",
                       hint="pass --runner pooling (vLLM then converts it to embed)")
    if conv is None:
        if convert not in (None, "auto", "none"):
            raise BadInput(f"--convert {convert} applies to the pooling runner",
                           hint=f"add --runner pooling, or drop --convert {convert}")
        return
    asked = f"--task {task}" if task not in (None, "auto") else "--runner pooling"
    if not value_at(POOLING_RUNNER, version, False):
        first = POOLING_RUNNER[0].since
        raise BadInput(f"memprof models vLLM's pooling runner (embedding models) from {first}, "
                       f"where its profile run was read; not at {version}",
                       hint=f"use --engine-version {first} or later, or drop {asked}")
    if conv == "reward" and rule_in_force(REWARD_CONVERT, version) is None:
        removed = REWARD_CONVERT[-1].until
        raise BadInput(f"vLLM {version} has no --convert reward (gone in {removed}: "
                       "config/model.py ConvertType is none, embed, classify)",
                       hint="use --convert embed (the conversion memprof models)")
    if conv == "none":
        arch = spec.architecture if spec is not None else "the model"
        if not bare:  # a *ForCausalLM kept as it is: no pooler to run
            raise BadInput(f"--runner pooling --convert none: {arch} is no pooling model, and "
                           "vLLM refuses it ('This model does not support `--runner pooling`. "
                           "You can pass `--convert <embed|classify>` to adapt it': "
                           "config/model.py)", hint="use --convert embed (or auto)")
        raise BadInput(f"--convert none on {arch}: memprof reads a bare decoder's pooler under "
                       "--convert auto (embed) only", hint="use --convert auto (or embed)")
    if conv not in ("embed", "classify"):
        raise BadInput(f"--convert {conv} (adapters.py as_reward_model: every token's hidden "
                       "state, ALL pooling) is not modelled; memprof models --convert embed "
                       "and classify",
                       hint="use --convert embed, or a *ForSequenceClassification reward "
                            "checkpoint (--convert classify)")
    if conv == "classify" and spec is not None:
        check_score_head(spec.raw, spec.architecture, quantised=quantised)
    if lora:
        raise BadInput(f"--enable-lora with {asked} is not modelled (memprof's LoRA "
                       "buffers include the lm_head's, which a pooling model does not build)",
                       hint="drop --enable-lora, or use the generation runner")
    if spec is not None and spec.vision is not None:
        raise BadInput(f"{spec.name} is a multimodal model: its pooling runner (an encoder "
                       "cache beside the pooler) is not modelled",
                       hint="memprof models text-only embedding models (--runner pooling)")


def check_score_head(cfg: dict[str, Any], architecture: str, *, quantised: bool) -> None:
    """Refuse a ``--convert classify`` whose score head memprof cannot size (module docstring,
    item 9): a causal LM's checkpoint holds no ``score.weight``, so vLLM builds the head only
    from the lm_head (``classifier_from_token`` + ``method``; otherwise its strict load fails:
    model_loader/default_loader.py "Following weights were not initialized from checkpoint");
    a quantised checkpoint's score head takes its ``quant_config``; a ``head_dtype`` other than
    fp32 changes the head and the pooler's copies. The label count is read (and its errors
    raised) here too (``score_labels``)."""
    if not is_seq_cls(architecture) and seq_cls_method(cfg, architecture) is None:
        raise BadInput(f"--convert classify on {architecture}: a causal LM's checkpoint has no "
                       "score.weight, and vLLM builds the score head from its lm_head only "
                       "with classifier_from_token and method (adapters.py "
                       "seq_cls_model_loader)",
                       hint="pass them as the model card does, e.g. --hf-overrides "
                            "'{\"classifier_from_token\": [\"no\", \"yes\"], \"method\": "
                            "\"from_2_way_softmax\"}'")
    if quantised:
        raise BadInput(f"{architecture} quantised with a score head (--convert classify): the "
                       "head under the checkpoint's quant_config (adapters.py as_seq_cls_model) "
                       "is not modelled", hint="size the unquantised checkpoint")
    head = cfg.get("head_dtype")
    if head is not None and str(head).lower() not in ("float32", "fp32", "torch.float32"):
        raise BadInput(f"head_dtype {str(head)[:40]!r}: memprof models the pooling runner's "
                       "fp32 head (config/model.py _get_head_dtype) only",
                       hint="drop head_dtype from the config / --hf-overrides")
    score_labels(cfg, architecture)


def score_head(cfg: dict[str, Any], architecture: str, convert: str | None, version: str
               ) -> tuple[int, str, str] | None:
    """(num_labels, dtype, where num_labels came from) of the score head a ``--convert
    classify`` rank builds (``SCORE_HEAD``), ``None`` without one."""
    rule = rule_in_force(SCORE_HEAD, version) if convert == "classify" else None
    if rule is None:
        return None
    labels, why = score_labels(cfg, architecture)
    return labels, str(rule.value), why


def score_head_notes(spec: ModelSpec, dep: object) -> tuple[str, ...]:
    """The score head's size and where its label count was read (one line), where one is
    built."""
    head = score_head(spec.raw, spec.architecture, convert_of(dep),
                      str(getattr(dep, "engine_version", "") or ""))
    if head is None:
        return ()
    labels, dtype, why = head
    return (f"score head: num_labels {labels} ({why}), [{labels}, {spec.hidden_size}] {dtype} "
            "on every rank (adapters.py as_seq_cls_model: ReplicatedLinear)",)


def drops_lm_head(convert: str | None, version: str) -> bool:
    """Whether the rank builds no untied lm_head (``POOLING_DROPS_LM_HEAD``)."""
    return convert is not None and rule_in_force(POOLING_DROPS_LM_HEAD, version) is not None


def graph_mode(convert: str | None, version: str) -> str | None:
    """The CUDA-graph mode a pooling model gets (``POOLING_GRAPH_MODE``), or ``None``."""
    if convert is None:
        return None
    return str(value_at(POOLING_GRAPH_MODE, version, None) or "") or None


def pooler_parts(version: str, *, tokens: int, rows: int, hidden: int, model_itemsize: int,
                 v2: bool = False, labels: int | None = None) -> list[tuple[str, int]]:
    """The tensors alive at the peak of ``_dummy_pooler_run`` on T = ``tokens`` hidden states
    split over R = ``rows`` requests (module docstring, items 3, 7 and 9; ``v2``: Model Runner
    V2's ``PoolingRunner.dummy_pooler_run``; ``labels``: L of ``--convert classify``'s score
    head, ``None`` for embed)::

        hidden states [T,H] + last hidden [R,H] (model dtype, alive from _dummy_run)
        + V1 only: dummy prompt token ids [R, T//R] int32
        + embed (LAST):     gathered [R,H] + fp32 copy [R,H] + normalised [R,H] fp32
          or, where the token task runs (POOLER_TOKEN_TASK), the larger
          token_embed (ALL): every request's normalised fp32 [t,H] kept in the output list,
                             + the last request's fp32 copy [t_last,H] at its normalise
        classify instead of embed:
          classify (LAST):  gathered [R,H] + fp32 copy [R,H] + logits and scores [R,L] fp32
          token_classify (ALL, where the token task runs): every request's scores [t,L] fp32
                             kept + the last request's fp32 copy [t_last,H] and logits
                             [t_last,L]

    with t = T // R; t_last = t + T % R on V1 (``_dummy_pooler_run_task`` gives the remainder to
    the last request), t + 1 where T % R > 0 on V2 (one extra token each to the last T % R
    requests). The fp32 copies are ``.to(head_dtype)``, no copy where the model dtype is fp32.
    [approximation] classify's [R, L] logits are counted beside the gathered rows, which 0.11.0's
    ``ClassifierPooler`` frees at the cast (L × 4 bytes a row)."""
    t, r, h, s = tokens, max(1, min(rows, tokens)), hidden, model_itemsize
    f = HEAD_DTYPE_BYTES
    copy = 0 if s == f else f  # Tensor.to returns the tensor itself when the dtype matches
    parts = [("hidden [T,H] + last hidden [R,H]", (t + r) * h * s)]
    if not v2:
        parts.append(("dummy prompt token ids [R,T/R] int32", r * (t // r) * 4))
    runs_token = bool(value_at(POOLER_TOKEN_TASK, version, False))
    t_last = t // r + ((1 if t % r else 0) if v2 else t % r)
    if labels is not None:
        last = r * h * (s + copy) + 2 * r * labels * f
        token = (t * labels * f + t_last * (h * copy + labels * f)) if runs_token else 0
        names = ("token_classify: kept scores [T,L] fp32 + last request's fp32 copy and logits",
                 "classify (LAST): gathered [R,H] + fp32 copy + logits and scores [R,L]")
    else:
        last = r * h * (s + copy + f)
        token = (t * h * f + t_last * h * copy) if runs_token else 0
        names = ("token_embed: normalised fp32 [T,H] + last request's fp32 copy",
                 "embed (LAST): gathered [R,H] + fp32 copy + normalised [R,H]")
    parts.append((names[0], token) if token > last else (names[1], last))
    return parts


def pooling_runs_v2(version: str) -> bool | None:
    """Whether Model Runner V2 may take a pooling model at ``version`` (``POOLING_ON_V2``):
    False where vLLM keeps pooling models on the V1 runner, True where every model runs V2,
    ``None`` where no row holds (``vllm_runner.V2_DEFAULT`` alone decides)."""
    rule = rule_in_force(POOLING_ON_V2, version)
    return None if rule is None else bool(rule.value)


def convert_of(dep: object) -> str | None:
    """The pooling conversion of a deployment (``pooling_convert`` of its ``runner``,
    ``convert`` and ``task``), ``None`` on the generation runner or another engine."""
    if getattr(dep, "engine", "vllm") != "vllm":
        return None
    return pooling_convert(getattr(dep, "runner", "generate"), getattr(dep, "convert", None),
                           getattr(dep, "task", None))


def pooling_notes(dep: object) -> list[str]:
    """What the pooling runner changed in the estimate, and what it assumed (one line)."""
    convert = convert_of(dep)
    if convert is None:
        return []
    version = str(getattr(dep, "engine_version", "") or "")
    release, _ = split_generation(version)
    token = bool(value_at(POOLER_TOKEN_TASK, version, False))
    on_v2 = pooling_runs_v2(release)
    tasks = (f"the {convert} task"
             + (f" and the token_{convert} task on every token" if token else ""))
    if on_v2:
        runner = (f"vLLM {release} runs it with Model Runner V2 (every model from 0.29.0: "
                  "config/vllm.py use_v2_model_runner), whose profile run warms the pooler "
                  f"(PoolingRunner.dummy_pooler_run: {tasks}, once each) instead of the "
                  "sampler and which builds no Sampler for a pooling model, so no [R, V] logits "
                  "and no sampler state"
                  + ("" if getattr(dep, "enforce_eager", False) else
                     "; the budget charges V2's own CUDA-graph estimate "
                     "(memprof/core/terms/runner_v2_graphs.py)"))
    else:
        kept = (f"vLLM {release} keeps a pooling model on the V1 runner "
                "(_is_default_v2_model_runner_model: generation models only); "
                if on_v2 is False else "")
        runner = (f"{kept}the profile run warms the pooler (_dummy_pooler_run: {tasks}) "
                  "instead of the sampler, so no [R, V] logits")
    head = ("an untied lm_head is not built (adapters.py as_embedding_model)"
            if convert != "classify" else
            "an untied lm_head is not built and a score head [num_labels, H] in fp32 is, on "
            "every rank (adapters.py as_seq_cls_model); a *ForSequenceClassification gets "
            "this runner and conversion from vLLM's --runner / --convert auto (config/model.py "
            "_SUFFIX_TO_DEFAULTS), and a reranker whose score head is cut from its lm_head "
            "(classifier_from_token, method) "
            "builds that lm_head only inside the weight load, outside the budget")
    return [f"--runner pooling --convert {convert} (vLLM {release}): {runner}; {head}; CUDA "
            "graphs PIECEWISE only (pooling models get no FULL graphs). LAST pooling is assumed "
            "(the default of a converted *ForCausalLM): chunked prefill and prefix caching stay "
            "on and the batch defaults are a generation model's; a checkpoint whose "
            "sentence-transformers pooling is MEAN or CLS turns both off in vLLM, which memprof "
            "does not model"]
