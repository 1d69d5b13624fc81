"""Helpers of the checkpoint-weights tests: a bundled config as its JSON, and the weight bytes
memprof gives one rank of a deployment (``memprof.core.weights.rank_weights``)."""

from __future__ import annotations

import json
from typing import Any

from memprof.core.deployment import Deployment, ranks
from memprof.core.models import bundled_models, load_model
from memprof.core.weights import rank_weights


def bundled_config(name: str) -> dict[str, Any]:
    """The bundled ``config.json`` of ``name`` (a bundled id or HF id), parsed."""
    cfg = json.loads(bundled_models()[name].read_text())
    assert isinstance(cfg, dict)
    return cfg


def rank_weight_bytes(model: str, arch: str = "sm90", version: str | None = None,
                      tp: int = 1) -> int:
    """Weight bytes of rank 0 of ``model`` at TP ``tp`` on a card of ``arch``, at ``version``
    (``None``: the newest release modelled)."""
    spec = load_model(model)
    dep = Deployment(tp=tp, engine_version=version)
    return sum(t.bytes for t in rank_weights(spec, dep, spec.quant, ranks(dep)[0], arch))
