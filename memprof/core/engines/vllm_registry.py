"""Which model architectures a vLLM release can load: its model registry, read from the release
wheels into ``configs/vllm_architectures.json`` (``tools/vllm_architectures.py``: the keys of
the ``_*_MODELS`` dicts of ``vllm/model_executor/models/registry.py``, ``__init__.py`` before
0.6.3).

Only the releases that table lists are checked (0.6.0 – 0.7.2, the oldest memprof models,
where most of today's bundled models did not exist yet, and 0.10.0 / 0.10.1, between which
gpt-oss's GptOssForCausalLM arrived: explain places a log between them by it,
``memprof.probes.log_deployment``); at any other release an architecture is taken as the
family row that reads it says (no refusal here).
"""

from __future__ import annotations

import json
from functools import lru_cache

from memprof.base.errors import BadInput
from memprof.core.models.load import configs_dir

TABLE = "vllm_architectures.json"


@lru_cache(maxsize=1)
def _registry() -> dict[str, frozenset[str]]:
    path = configs_dir() / TABLE
    if not path.is_file():
        return {}
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {r: frozenset(archs) for r, archs in doc["releases"].items()}


def registered(release: str) -> frozenset[str] | None:
    """The architectures ``release``'s registry lists, or None where memprof has not read it."""
    return _registry().get(release)


def check_registered(release: str, architecture: str, model: str) -> None:
    """:class:`BadInput` where ``release``'s registry is read and does not list
    ``architecture`` (vLLM refuses such a checkpoint: "Model architectures [...] are not
    supported for now", model_executor/models/registry.py)."""
    known = registered(release)
    if known is None or architecture in known:
        return
    read = list(_registry())
    later = [r for r in read if architecture in _registry()[r]]
    where = (f"use --engine-version {later[0]} or later" if later else
             f"use a release after {read[-1]} (memprof reads the model registry of "
             f"{len(read)} releases from {read[0]} to {read[-1]}, and none of them lists "
             f"{architecture})")
    raise BadInput(f"vLLM {release} cannot load {model}: its model registry "
                   f"(model_executor/models/) has no {architecture}", hint=where)
