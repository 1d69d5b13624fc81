"""``memprof/core/scratch/terms.py`` skips the catalog for a rank no catalog key applies to; that
is exact only while the keys it reads cover the catalog: a backend row's ``scratch`` family, an
attention kind's ``scratch_key``, an engine's own keys. These tests hold the two together and
check the skip on deployments with and without scratch."""

from __future__ import annotations

from memprof.core.attention import KINDS
from memprof.core.attention_backends import ROWS
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import DP_ATTENTION_SCRATCH
from memprof.core.estimate import estimate
from memprof.core.scratch.catalog import CATALOG, buffers_for


def test_every_catalog_key_is_one_the_terms_read() -> None:
    backends = {r.name for r in ROWS if r.scratch}
    kinds = {k.scratch_key for k in KINDS.values() if k.scratch_key}
    assert {b.backend for b in CATALOG} <= backends | kinds | {DP_ATTENTION_SCRATCH}


def test_a_backend_without_a_scratch_family_has_no_catalog_entry() -> None:
    assert [r.name for r in ROWS if not r.scratch and buffers_for(r.name)] == []


def test_scratch_appears_exactly_where_a_key_applies() -> None:
    plain = estimate("qwen3-32b", Deployment(), gpu_name="H200")
    mla = estimate("deepseek-r1", Deployment(tp=8), gpu_name="B200")  # CUTLASS MLA workspace
    dp = estimate("deepseek-r1", Deployment(engine="sglang", tp=8, dp=8,
                                            enable_dp_attention=True), gpu_name="H200")
    assert plain.ranks[0].category_bytes("scratch") == 0
    assert mla.ranks[0].category_bytes("scratch") > 0
    assert dp.ranks[0].category_bytes("scratch") > 0
