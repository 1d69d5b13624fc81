"""``ModelSpec.is_moe`` and ``ModelSpec.has_state_mixer`` are read from the layers once, at
construction: on every bundled model (with and without MTP layers) they equal a walk of the
layers, and a copy with other layers (``dataclasses.replace``) reads its own."""

from __future__ import annotations

from dataclasses import replace

from memprof.core.models.load import bundled_models, load_model
from memprof.core.models.spec import ModelSpec


def _walk(spec: ModelSpec) -> tuple[bool, bool]:
    return (any(x.mlp.kind == "moe" for x in spec.layers),
            any(bool(x.attention.mixer) and x.attention.mixer.kind != "none"
                for x in spec.layers))


def test_flags_equal_a_walk_of_the_layers() -> None:
    seen = set()
    for model in sorted(bundled_models()):
        for mtp in (False, True):
            spec = load_model(model, speculative_mtp=mtp)
            assert (spec.is_moe, spec.has_state_mixer) == _walk(spec), model
            seen.add(_walk(spec))
    assert {(True, False), (False, False), (False, True)} <= seen  # each kind of model met


def test_a_copy_reads_its_own_layers() -> None:
    moe = next(s for s in map(load_model, sorted(bundled_models())) if s.is_moe)
    dense = next(s for s in map(load_model, sorted(bundled_models()))
                 if not s.is_moe and not s.has_state_mixer)
    hybrid = next(s for s in map(load_model, sorted(bundled_models())) if s.has_state_mixer)
    assert not replace(moe, layers=dense.layers).is_moe
    assert replace(dense, layers=moe.layers).is_moe
    assert replace(dense, layers=hybrid.layers).has_state_mixer
    assert not replace(hybrid, layers=dense.layers).has_state_mixer
