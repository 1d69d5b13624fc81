"""SGLang's prefill (piecewise) CUDA graphs, a component of their own from 0.5.10, when they are
on by default (memprof/core/terms/cudagraph.py ``prefill_graph_terms``): one capture per token
count of the release's grid up to the chunk, predicted as vLLM's PIECEWISE capture of those
sizes, against the line SGLang logs ("Capture piecewise CUDA graph end … mem usage", 0.5.14 on
"Capture target prefill CUDA graph end … mem usage")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.base.units import GiB
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang import prefill_graph_sizes
from memprof.core.estimate import estimate
from memprof.core.terms.cudagraph import PREFILL_GRAPHS

_ROWS = {r["id"]: r for r in json.loads(
    (Path(__file__).parent / "data" / "published.json").read_text())["rows"]}


def _prefill(version: str, **kw: object) -> list:
    dep = Deployment(engine="sglang", engine_version=version, max_model_len=8192,
                     mem_fraction_static=0.9, **kw)  # type: ignore[arg-type]
    e = estimate("qwen3-32b", dep, gpu_name="H100")
    return [c for c in e.ranks[0].components if c.name == PREFILL_GRAPHS]


def test_none_before_0510_where_they_are_opt_in() -> None:
    assert _prefill("0.5.9") == []


def test_one_capture_per_prefill_size_up_to_the_chunk() -> None:
    (comp,) = _prefill("0.5.10")
    # H100: chunk 8192 -> 58 prefill sizes (prefill_graph_sizes)
    assert comp.count == prefill_graph_sizes(8192) == 58
    assert comp.where == "runtime" and "captured piecewise" in comp.formula
    assert "logits buffer" not in comp.formula  # the decode runner's own before 0.5.16


def test_from_0516_they_allocate_the_shared_logits_buffer() -> None:
    (old,) = _prefill("0.5.14")
    (new,) = _prefill("0.5.16")
    assert "shared fp32 logits buffer [256, 151,936]" in new.formula
    assert new.bytes - old.bytes >= 256 * 151936 * 4


def test_pipeline_parallelism_turns_them_off() -> None:
    assert _prefill("0.5.19", pp=2) == []


@pytest.mark.parametrize("row_id", [1451, 1452])
def test_published_prefill_graph_figures_within_a_quarter(row_id: int) -> None:
    from test_published_distribution import row_estimate

    row = _ROWS[row_id]
    key = next(k for k in ("prefill_graph_mem_usage_gb", "piecewise_graph_mem_usage_gb")
               if k in row["observed"])
    e, _ = row_estimate(row)
    got = max(sum(c.bytes for c in r.components if c.name == PREFILL_GRAPHS)
              for r in e.ranks) / GiB
    want = row["observed"][key]
    assert abs(got - want) / want <= 0.25, (key, want, got)
