"""Which model architectures an SGLang release loads with its own model code: its
``ModelRegistry``, read from the release wheels into ``configs/sglang_architectures.json``
(``tools/sglang_architectures.py``: the ``__name__`` of each class the ``EntryClass`` of a module
of ``sglang/srt/models/`` names, as ``models/registry.py`` ``import_model_classes`` collects
them).

Every SGLang release memprof models is read (0.4.3 on); the source snapshots are not, and are
not checked. An architecture a release's registry lacks is refused: SGLang itself either stops
("Model architectures [...] are not supported for now", ``_raise_for_unsupported``) or, where
the release ships ``TransformersForCausalLM``, falls back to Hugging Face's model code
(``_normalize_archs``), which is not the model memprof estimates.
"""

from __future__ import annotations

from memprof.core.engines.model_registry import check, table

TABLE = "sglang_architectures.json"


def registered(release: str) -> frozenset[str] | None:
    """The architectures ``release``'s registry holds, or None where memprof has not read it."""
    return table(TABLE).get(release)


def check_registered(release: str, architecture: str, model: str) -> None:
    """:class:`BadInput` where ``release``'s registry is read and does not hold
    ``architecture``."""
    check(TABLE, "SGLang", "srt/models/", release, architecture, model)
