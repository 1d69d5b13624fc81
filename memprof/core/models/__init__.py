"""Model specs: a HF ``config.json`` normalised into a spec that knows every layer.

- ``spec``: the result classes (``ModelSpec``, ``Layer``, ``Attention``, ``StateMixer``, ``MLP``,
  ``QuantConfig``);
- ``config``: typed validation of config.json and typed access to its fields;
- ``families``: the registry of families and their layer builders;
- ``quant_config``: the quantisation a checkpoint or ``--quantization`` declares;
- ``load``: finding a config (bundled name, HF repo id, path) and building its spec.
"""

from memprof.core.models.load import (
    bundled_models,
    configs_dir,
    hf_ids,
    load_config,
    load_model,
    resolve_config_path,
    spec_from_config,
)
from memprof.core.models.quant_config import quant_from_config, quant_from_flag
from memprof.core.models.spec import (
    MLP,
    Attention,
    Layer,
    ModelSpec,
    QuantConfig,
    StateMixer,
    layer_kinds,
)

__all__ = ["MLP", "Attention", "Layer", "ModelSpec", "QuantConfig", "StateMixer",
           "bundled_models",
           "configs_dir", "hf_ids", "layer_kinds", "load_config", "load_model",
           "quant_from_config", "quant_from_flag", "resolve_config_path", "spec_from_config"]
