"""Which model architectures a vLLM release can load: its model registry, read from the release
wheels into ``configs/vllm_architectures.json`` (``tools/vllm_architectures.py``: the keys of
the ``_*_MODELS`` dicts of ``vllm/model_executor/models/registry.py``, ``__init__.py`` before
0.6.3, less the architectures it lists as removed or moved to plugins).

Every release memprof models is read (0.6.0 to the newest), so an estimate at a release that
cannot load the checkpoint is refused as vLLM refuses it ("Model architectures [...] are not
supported for now", ``ModelRegistry._raise_for_unsupported``), and explain places a log between
the releases by it (``memprof.probes.log_deployment``). From 0.8 on vLLM may still run an
unregistered architecture through its Transformers backend (``model_impl`` "auto" falls back
to it where Hugging Face's model class supports it): that is not the model memprof estimates.
"""

from __future__ import annotations

from functools import lru_cache

from memprof.core.engines.model_registry import check, table
from memprof.core.models.score_heads import seq_cls_base
from memprof.core.versions import version_key

TABLE = "vllm_architectures.json"
# ModelRegistry._normalize_arch (model_executor/models/registry.py, first in 0.10.1's wheel, not
# in 0.10.0's): an unregistered *ForSequenceClassification whose causal LM is registered loads
# as that class, converted (as_seq_cls_model); memprof sizes it so (score_heads.seq_cls_base)
SEQ_CLS_CONVERSION_SINCE = "0.10.1"


def registered(release: str) -> frozenset[str] | None:
    """The architectures ``release``'s registry lists, or None where memprof has not read it."""
    return table(TABLE).get(release)


def check_registered(release: str, architecture: str, model: str) -> None:
    """:class:`BadInput` where ``release``'s registry is read and does not list
    ``architecture`` (vLLM refuses such a checkpoint: "Model architectures [...] are not
    supported for now", model_executor/models/registry.py); a sequence-classification
    architecture whose causal LM the registry lists is converted from ``SEQ_CLS_CONVERSION_SINCE``
    on."""
    if not _converted(release, architecture):
        check(TABLE, "vLLM", "model_executor/models/", release, architecture, model)


@lru_cache(maxsize=4096)
def _converted(release: str, architecture: str) -> bool:
    """Does ``release`` load ``architecture`` by converting a registered causal LM
    (``SEQ_CLS_CONVERSION_SINCE``)?"""
    known = registered(release)
    return (known is not None and architecture not in known
            and version_key(release) >= version_key(SEQ_CLS_CONVERSION_SINCE)
            and seq_cls_base(architecture, known) is not None)
