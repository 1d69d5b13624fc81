"""SGLang's request-to-token table (memprof/core/engines/sglang_req_pool.py,
memprof/core/terms/request_table.py): each release row against a hand count from the source,
the default request count, the component in an estimate (outside the budget, no KV figure
moved), and the "Memory pool end" free memory of the SGLang docs logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memprof.cli import run
from memprof.core.deployment import Deployment
from memprof.core.engines.sglang_req_pool import (
    SGLANG_REQ_TO_TOKEN,
    default_max_num_reqs,
    req_to_token_table,
)
from memprof.core.estimate import default_terms, estimate
from memprof.core.terms.request_table import REQUEST_TABLE, request_table_terms
from memprof.core.versions import rule_in_force

CTX = 131_072  # Llama-3.1-8B's max_position_embeddings
POOL = 444_372  # the pool of published row 653 (SGLang 0.4.3 docs log, "max_total_num_tokens")


def _sgl(version: str, **kw: object) -> Deployment:
    return Deployment(engine="sglang", engine_version=version, max_model_len=CTX, **kw)  # type: ignore[arg-type]


# release → (rows, columns) counted by hand from that release's init_memory_pool:
# ReqToTokenPool(size=max_num_reqs + 1, max_context_len=context_len + 4) up to 0.4.6,
# size=max_num_reqs from 0.4.7; max_num_reqs = min(max(int(444372 / 131072 * 512), 2048), 4096)
# = min(max(1735, 2048), 4096) = 2048
HAND = {
    "0.4.3": (2049, 131_076), "0.4.4": (2049, 131_076), "0.4.6": (2049, 131_076),
    "0.4.7": (2048, 131_076), "0.4.10": (2048, 131_076), "0.5.1": (2048, 131_076),
    "0.5.3": (2048, 131_076), "0.5.4": (2048, 131_076), "0.5.9": (2048, 131_076),
    "main@d315eb7": (2048, 131_076),
}


@pytest.mark.parametrize("version", sorted(HAND))
def test_each_release_row_against_a_hand_count(version: str) -> None:
    rows, cols = HAND[version]
    t = req_to_token_table(_sgl(version), POOL, None)
    assert (t.rows, t.columns) == (rows, cols)
    assert t.bytes == rows * cols * 4
    assert f"{rows - (rows % 2):,}" in t.formula and "int32" in t.formula


def test_every_row_is_read_at_a_release_and_cites_it() -> None:
    for r in SGLANG_REQ_TO_TOKEN:
        assert r.engine == "sglang" and "sglang 0." in r.source
        held = rule_in_force(SGLANG_REQ_TO_TOKEN, r.since or "0.4.3", "sglang")
        assert held is r
    # 0.4.3 at Llama-3.1-8B's context: 2,049 × 131,076 × 4 B, about 1.00 GiB (the docs logs'
    # gap between "KV Cache is allocated" and "Memory pool end")
    assert req_to_token_table(_sgl("0.4.3"), POOL, None).bytes == 1_074_298_896


def test_the_default_request_count_floor_middle_and_ceiling() -> None:
    assert default_max_num_reqs(4 * CTX, CTX) == 2048  # 4 contexts: the floor
    assert default_max_num_reqs(6 * CTX, CTX) == 3072  # 6 contexts: 6 × 512
    assert default_max_num_reqs(6 * CTX - 1, CTX) == 3071  # int() truncates
    assert default_max_num_reqs(100 * CTX, CTX) == 4096  # the ceiling


def test_a_given_max_running_requests_sizes_the_table() -> None:
    t = req_to_token_table(_sgl("0.5.9"), POOL, 64)
    assert t.bytes == 64 * (CTX + 4) * 4
    assert "--max-running-requests 64" in t.formula
    old = req_to_token_table(_sgl("0.4.3"), POOL, 64)
    assert old.bytes == 65 * (CTX + 4) * 4


def _without_table() -> tuple[list, list]:  # type: ignore[type-arg]
    before, after = default_terms()
    return before, [f for f in after if f is not request_table_terms]


@pytest.mark.parametrize("version", ["0.4.3", "0.5.9"])
def test_in_an_estimate_outside_the_budget_and_no_kv_figure_moves(version: str) -> None:
    dep = Deployment(engine="sglang", engine_version=version)
    e = estimate("llama-3.1-8b", dep, gpu_name="H100")
    base = estimate("llama-3.1-8b", dep, gpu_name="H100", terms=_without_table())
    r, b = e.ranks[0], base.ranks[0]
    (c,) = [x for x in r.components if x.name == REQUEST_TABLE]
    assert (c.where, c.profiled, c.category) == ("runtime", False, "scratch")
    tokens = r.kv.num_gpu_blocks * r.plan.block_size
    rows = default_max_num_reqs(tokens, e.max_model_len) + (1 if version == "0.4.3" else 0)
    assert c.bytes == rows * (e.max_model_len + 4) * 4
    # the KV pool is sized before the table: nothing of it moves; the headroom loses the table
    assert (r.kv, r.available_kv_bytes, r.requested_bytes) == (b.kv, b.available_kv_bytes,
                                                                b.requested_bytes)
    assert r.headroom_bytes == b.headroom_bytes - c.bytes


def test_a_max_num_seqs_other_than_the_stand_in_is_read_as_given() -> None:
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", max_num_seqs=128), gpu_name="H100")
    (c,) = [x for x in e.ranks[0].components if x.name == REQUEST_TABLE]
    assert c.bytes == 128 * (e.max_model_len + 4) * 4
    # H100's stand-in (1024) reads as not given, and the formula says so
    e = estimate("llama-3.1-8b", Deployment(engine="sglang", max_num_seqs=1024), gpu_name="H100")
    (c,) = [x for x in e.ranks[0].components if x.name == REQUEST_TABLE]
    assert c.bytes > 2048 * e.max_model_len * 4 and "stand-in" in c.formula


def test_vllm_has_no_request_table() -> None:
    e = estimate("llama-3.1-8b", Deployment(), gpu_name="H100")
    assert not [x for x in e.ranks[0].components if x.name == REQUEST_TABLE]


def _quote(row_id: int) -> str:
    data = json.loads((Path(__file__).parent / "data" / "published.json").read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    return str(next(r for r in rows if r.get("id") == row_id)["quote"])


# The SGLang docs logs of Llama-3.1-8B (published rows 405, 651-653): "Memory pool end. avail
# mem" was 1.01-1.12 GiB below memprof's figure before the table (measured with `memprof explain
# LOG --model llama-3.1-8b --gpu H100`: +1.10 GiB, +1.06 GiB, +1.12 GiB, +1013.5 MiB); with it
# the gap is at most 118 MiB (1.4%).
@pytest.mark.parametrize("row_id", [405, 651, 652, 653])
def test_memory_pool_end_of_the_docs_logs(row_id: int, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "log.txt"
    log.write_text(_quote(row_id), encoding="utf-8")
    assert run(["explain", str(log), "--model", "llama-3.1-8b", "--gpu", "H100", "-f",
                "json"]) in (0, 1)
    figures = {f["key"]: f for f in json.loads(capsys.readouterr()[0])["figures"]}
    pool = figures["avail_after_pool_bytes"]
    assert abs(pool["delta"]) < 128 * 2**20 and abs(pool["delta_pct"]) < 1.5, pool
    assert pool["reproduced"]
