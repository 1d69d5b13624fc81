"""Which linears a pre-quantised bitsandbytes checkpoint keeps unquantised, as each vLLM release
reads its ``quantization_config.llm_int8_skip_modules``.

vLLM's ``BitsAndBytesConfig.get_quant_method`` (``model_executor/layers/quantization/
bitsandbytes.py``) gives a ``LinearBase`` whose prefix ``is_layer_skipped_bnb`` matches an
``UnquantizedLinearMethod`` (the model dtype) and every other linear ``BitsAndBytesLinearMethod``.
The match changed twice (read in the released wheels):

* 0.6.3.post1: no skip list; every linear is 4-bit.
* 0.6.4.post1 to 0.7.2: an entry skips a module when it equals one dot-separated component of
  the module's prefix (``"lm_head"``, ``"mlp"``); vllm-project/vllm#9887 made it so, replacing a
  substring match that let ``kv_proj`` match inside ``qkv_proj``.
* 0.7.3 on (read 0.7.3, 0.8.0): also when it equals a leading run of components, so that a
  dotted entry names one module and what is under it (``"model.layers.1.mlp"``: layer 1's
  ``gate_up_proj`` and ``down_proj``); vllm-project/vllm#12974, written for Unsloth's "dynamic"
  4-bit checkpoints, whose configs list such entries.

Where the checkpoint stores a linear unquantised (its entry matches as 0.7.3 reads it: the
writer's own reading, HF transformers' ``llm_int8_skip_modules``) but the release builds it
4-bit, the release cannot load it (the loader copies the 16-bit tensor into the packed uint8
parameter, whose shape ``MergedColumnParallelLinear.weight_loader`` asserts): memprof refuses it
with the release that reads it.
"""

from __future__ import annotations

from memprof.base.errors import ConfigError
from memprof.core.versions import Rule, rule_in_force

# how ``is_layer_skipped_bnb`` matches: "none" (no skip list), "component" (an entry equals a
# component of the prefix), "component_or_prefix" (or a leading run of components)
BNB_SKIP_MATCH: tuple[Rule, ...] = (
    Rule(name="bnb_skip_modules", changes="weights: bitsandbytes llm_int8_skip_modules",
         since=None, until="0.6.4", value="none", introduced_by="before 0.6.0",
         removed_by="is_layer_skipped_bnb (vllm-project/vllm#9887's whole-component match; "
         "first read in the 0.6.4.post1 wheel)",
         source="0.6.3.post1 model_executor/layers/quantization/bitsandbytes.py "
         "BitsAndBytesConfig.get_quant_method (every LinearBase: BitsAndBytesLinearMethod)",
         applies_to="bnb"),
    Rule(name="bnb_skip_modules", changes="weights: bitsandbytes llm_int8_skip_modules",
         since="0.6.4", until="0.7.3", value="component",
         introduced_by="is_layer_skipped_bnb (vllm-project/vllm#9887's whole-component match; "
         "first read in the 0.6.4.post1 wheel)",
         removed_by="leading-prefix match (vllm-project/vllm#12974, first released in 0.7.3)",
         source="0.6.4.post1 / 0.7.1 / 0.7.2 model_executor/layers/quantization/bitsandbytes.py "
         "is_layer_skipped_bnb: any(module_name in prefix.split('.'))", applies_to="bnb"),
    Rule(name="bnb_skip_modules", changes="weights: bitsandbytes llm_int8_skip_modules",
         since="0.7.3", until=None, value="component_or_prefix",
         introduced_by="leading-prefix match (vllm-project/vllm#12974, first released in 0.7.3)",
         source="0.7.3 / 0.8.0 model_executor/layers/quantization/bitsandbytes.py "
         "is_layer_skipped_bnb: substr_check or prefix_check", applies_to="bnb"),
)

RULES = (BNB_SKIP_MATCH,)


def skip_matches(skip: tuple[str, ...], module: str, match: str) -> bool:
    """``is_layer_skipped_bnb(module, skip)`` under one release's ``match``."""
    if match == "none" or not skip:
        return False
    parts = module.split(".")
    if any(entry in parts for entry in skip):
        return True
    if match == "component":
        return False
    leading = {".".join(parts[:i + 1]) for i in range(len(parts))}
    return not leading.isdisjoint(skip)


def bnb_skipped(skip: tuple[str, ...], module: str, version: str | None,
                engine: str = "vllm") -> bool | None:
    """Whether ``engine`` at ``version`` keeps the linear ``module`` (its vLLM prefix,
    ``model.layers.1.mlp.gate_up_proj``) unquantised; None where no row holds for the engine
    (the caller's generic exclusion match then decides); :class:`ConfigError` where the
    checkpoint stores it unquantised and the release builds it 4-bit (module docstring)."""
    row = rule_in_force(BNB_SKIP_MATCH, version, engine)
    if row is None:
        return None
    match = str(row.value)
    if skip_matches(skip, module, match):
        return True
    if skip_matches(skip, module, "component_or_prefix"):
        raise ConfigError(
            f"the checkpoint keeps {module} unquantised (llm_int8_skip_modules), but vLLM "
            f"{version or 'at this release'} builds it 4-bit ("
            + ("its bitsandbytes config has no skip list" if match == "none" else
               "is_layer_skipped_bnb matches an entry to one component of the name")
            + ") and cannot load the 16-bit tensor",
            hint=f"use --engine-version {BNB_SKIP_MATCH[-1].since} or later (vllm-project/"
            "vllm#12974 matches a dotted entry as a leading prefix), or the plain bnb-4bit "
            "checkpoint")
    return False
