"""vLLM's prefix caching of hybrid models (``mamba_cache_mode``, the release table in
memprof/core/hybrid_state.py): the state pages one request holds in each state group, counted
by hand from the engine source (``MambaSpec.max_memory_usage_bytes``, v1/kv_cache_interface.py)
and checked against the published rows 109/110 (tests/data/published.json)."""

from __future__ import annotations

import json
import subprocess

import pytest

from memprof.base.errors import BadInput
from memprof.base.units import GiB
from memprof.core.deployment import Deployment, ranks, validate
from memprof.core.hybrid_state import resolve_mamba_cache_mode, state_pages_per_request
from memprof.core.kvcache import capacity, hybrid_token_line_per_group, kv_plan
from memprof.core.models import load_model
from tests.cli_helpers import completed

QWEN35 = "qwen3.5-35b-a3b"
QWEN3_NEXT = "qwen3-next-80b-a3b-instruct"
NEMOTRON_H = "nemotron-h-8b-base-8k"


def _plan(name: str, arch: str = "sm90", **kw: object):  # type: ignore[no-untyped-def]
    spec = load_model(name)
    dep = Deployment(tp=1, **kw)  # type: ignore[arg-type]
    validate(dep, spec)
    return kv_plan(spec, dep, ranks(dep)[0], spec.dtype, arch)


@pytest.mark.parametrize(("gib", "blocks", "concurrency", "tokens"),
                         [(6.01, 300, "4.35", 569_878), (5.98, 299, "4.33", 567_978)])
def test_rows_109_110_align_mode(gib: float, blocks: int, concurrency: str, tokens: int) -> None:
    """Rows 109/110 (vLLM 0.24.0, RTX 5090 = sm120, Qwen3.6-35B-A3B shapes, fp8 KV,
    max_model_len 131,072, 'enable_prefix_caching': True in the logged non-default args): the
    2,096-token block; 300 (299) blocks from the logged KV memory; a request counts
    cdiv(131072, 2096) = 63 full-attention blocks + 3 state groups × 2 pages ('align': 2 +
    num_speculative_blocks 0) = 69, so 300 / 69 = 4.35x (299 / 69 = 4.33x) and the token line
    int(concurrency × 131,072), as 0.20.1 on print it."""
    plan = _plan(QWEN35, "sm120", kv_cache_dtype="fp8", max_model_len=131_072,
                 engine_version="0.24.0", enable_prefix_caching=True)
    assert plan.block_size == 2096 and plan.state_pages == 2
    assert [(n, g) for n, _b, _w, g in plan.group_blocks] == [("full", 1), ("state", 3)]
    cap = capacity(plan, int(gib * GiB), 131_072, 8192,
                   hybrid_token_line_per_group("0.24.0"))
    assert cap.num_gpu_blocks == blocks
    assert cap.blocks_per_request == 63 + 3 * 2 == 69
    assert f"{cap.max_concurrency:.2f}" == concurrency
    assert cap.tokens == int(blocks / 69 * 131_072) == tokens
    # without the flag 0.24.0 keeps prefix caching off for a hybrid model: 300 / 66 = 4.55x
    off = _plan(QWEN35, "sm120", kv_cache_dtype="fp8", max_model_len=131_072,
                engine_version="0.24.0")
    assert off.state_pages == 1
    assert f"{capacity(off, int(6.01 * GiB), 131_072, 8192).max_concurrency:.2f}" == "4.55"


def test_qwen3_next_before_and_after_the_default_flip() -> None:
    """Qwen3-Next (1 full-attention group + 3 Gated DeltaNet state groups, 544-token block):
    0.25.0 leaves prefix caching off for hybrid models (1 page), 0.26.0 turns it on ('align',
    2 pages), 0.33.0 adds FlashInfer's prefill checkpoint on Hopper (3 pages) but not on Ampere
    (the Triton prefill), and --no-enable-prefix-caching returns to 1 page."""
    mml = 8192
    full = -(-mml // 544)
    for version, arch, pages in (("0.25.0", "sm90", 1), ("0.26.0", "sm90", 2),
                                 ("0.32.0", "sm90", 2), ("0.33.0", "sm90", 3),
                                 ("0.33.0", "sm86", 2)):
        plan = _plan(QWEN3_NEXT, arch, max_model_len=mml, engine_version=version)
        assert plan.block_size == 544
        assert plan.state_pages == pages, (version, arch)
        assert plan.blocks_per_request(mml, 8192) == full + 3 * pages
        # align keeps the pool's blocks: only what a request counts moves
        assert plan.block_bytes == _plan(QWEN3_NEXT, arch, max_model_len=mml,
                                         engine_version=version,
                                         enable_prefix_caching=False).block_bytes
    off = _plan(QWEN3_NEXT, max_model_len=mml, engine_version="0.33.0",
                enable_prefix_caching=False)
    assert off.blocks_per_request(mml, 8192) == full + 3


def test_nemotron_h_all_mode_and_align() -> None:
    """Nemotron-H 8B (Mamba-2, SupportsMambaPrefixCaching: 1 full group + 6 state groups; a
    528-token block without prefix caching): off by default through 0.25.x; 0.26.0/0.27.x pick
    'all': the block becomes a multiple of lcm(chunk_size 128, 16) that holds a state, 128 ×
    cdiv(cdiv(state, attention bytes a token), 128) = 640 (a state takes 513-528 tokens' worth,
    so 5 × 128), and a request counts cdiv(8192, 640) = 13 pages in every group, as before
    0.15.0 with --enable-prefix-caching; 0.28.0 picks 'align' (2); 0.32.0 adds the Mamba-2
    prefill checkpoint (3, whatever the GPU)."""
    mml = 8192
    assert _plan(NEMOTRON_H, max_model_len=mml, engine_version="0.25.0").state_pages == 1
    for version, flags in (("0.26.0", {}), ("0.27.0", {}),
                           ("0.31.0", {"mamba_cache_mode": "all"}),
                           ("0.14.1", {"enable_prefix_caching": True})):
        plan = _plan(NEMOTRON_H, max_model_len=mml, engine_version=version, **flags)
        assert plan.block_size == 640 == 128 * 5, version
        assert plan.state_pages == 0
        assert plan.blocks_per_request(mml, 8192) == 13 + 6 * 13
    full = -(-mml // 528)
    aligned = _plan(NEMOTRON_H, max_model_len=mml, engine_version="0.26.0",
                    mamba_cache_mode="align")
    assert aligned.block_size == 528
    assert aligned.state_pages == 2 and aligned.blocks_per_request(mml, 8192) == full + 6 * 2
    for version, arch, pages in (("0.28.0", "sm90", 2), ("0.31.0", "sm90", 2),
                                 ("0.32.0", "sm90", 3), ("0.33.0", "sm86", 3)):
        plan = _plan(NEMOTRON_H, arch, max_model_len=mml, engine_version=version)
        assert plan.state_pages == pages, (version, arch)
        assert plan.blocks_per_request(mml, 8192) == full + 6 * pages


def test_all_mode_without_a_chunk_size_is_refused() -> None:
    """Granite-4.0-H's bundled config states no mamba_chunk_size: vLLM would take the
    transformers class default, which memprof does not read, so 'all' is refused with the way
    out (0.26.0 picks it by default)."""
    with pytest.raises(BadInput, match="mamba_cache_mode 'all'") as err:
        _plan("granite-4.0-h-350m", max_model_len=8192, engine_version="0.26.0")
    assert "--no-enable-prefix-caching" in (err.value.hint or "")
    assert _plan("granite-4.0-h-350m", max_model_len=8192, engine_version="0.26.0",
                 enable_prefix_caching=False).state_pages == 1


def test_before_the_mode() -> None:
    """0.14.1 has no mamba_cache_mode: prefix caching asked for a Gated DeltaNet model is turned
    off (1 page); the flag itself is refused there."""
    assert _plan(QWEN3_NEXT, max_model_len=8192, engine_version="0.14.1",
                 enable_prefix_caching=True).state_pages == 1
    with pytest.raises(BadInput, match="no such flag"):
        _plan(QWEN3_NEXT, max_model_len=8192, engine_version="0.14.1",
              mamba_cache_mode="align")


def test_resolution_rules() -> None:
    """``MambaModelConfig.verify_and_update_config``: a mode with prefix caching off is reset to
    'none'; 'none' with it on is the release's default; 'all' on a model without Mamba-2
    prefix caching falls back to 'align'; a model without state mixers is 'none'."""
    gdn, m2 = frozenset({"gdn"}), frozenset({"mamba2"})
    assert resolve_mamba_cache_mode(version="0.30.0", mixers=gdn, enable_prefix_caching=False,
                                    requested="align") == "none"
    assert resolve_mamba_cache_mode(version="0.30.0", mixers=gdn, enable_prefix_caching=True,
                                    requested="none") == "align"
    assert resolve_mamba_cache_mode(version="0.30.0", mixers=gdn, enable_prefix_caching=None,
                                    requested="all") == "align"
    assert resolve_mamba_cache_mode(version="0.30.0", mixers=m2, enable_prefix_caching=None,
                                    requested="all") == "all"
    assert resolve_mamba_cache_mode(version="0.30.0", mixers=m2, enable_prefix_caching=None,
                                    requested=None) == "align"
    assert resolve_mamba_cache_mode(version="0.33.0", mixers=frozenset(),
                                    enable_prefix_caching=True, requested=None) == "none"
    # GDN's checkpoint needs FlashInfer's prefill: Blackwell only with 128-wide key heads
    assert state_pages_per_request("align", "gdn", "0.33.0", "sm100", 128) == 3
    assert state_pages_per_request("align", "gdn", "0.33.0", "sm100", 64) == 2
    assert state_pages_per_request("align", "kda", "0.33.0", "sm90", 128) == 2
    assert state_pages_per_request("none", "mamba2", "0.33.0", "sm90", 128) == 1


def _cli(*flags: str) -> subprocess.CompletedProcess[str]:
    return completed(["estimate", "--model", QWEN3_NEXT, "--gpu", "H200", "-tp", "2", "-f",
                      "json", *flags])


def test_cli_flags_are_echoed_and_bad_values_refused() -> None:
    on = json.loads(_cli("--enable-prefix-caching", "--mamba-cache-mode", "align").stdout)
    off = json.loads(_cli("--no-enable-prefix-caching").stdout)
    unset = json.loads(_cli().stdout)
    assert on["deployment"]["enable_prefix_caching"] is True
    assert on["deployment"]["mamba_cache_mode"] == "align"
    assert off["deployment"]["enable_prefix_caching"] is False
    assert unset["deployment"]["enable_prefix_caching"] is None
    # 0.33.0 on an H200: prefix caching on by default, 3 state pages a request
    assert unset["summary"]["max_concurrency"] == on["summary"]["max_concurrency"]
    assert off["summary"]["max_concurrency"] > on["summary"]["max_concurrency"]
    for flags, says in ((("--mamba-cache-mode", "sometimes"), "not one of"),
                        (("--mamba-cache-mode", "all"), "not one of"),
                        (("--mamba-cache-mode", "align", "--engine-version", "0.14.1"),
                         "no such flag")):
        p = _cli(*flags)
        err = p.stderr.splitlines()
        assert p.returncode == 2 and len(err) == 2, p.stderr
        assert err[0].startswith("error: ") and says in err[0]
        assert err[1].startswith("hint: ")


def test_a_log_s_prefix_caching_is_read() -> None:
    """Rows 109/110's issue logs (noonghunna/club-3090#652) list 'enable_prefix_caching': True
    in vLLM's non-default args; a pasted serve command spells it --enable-prefix-caching /
    --no-enable-prefix-caching (vLLM's BooleanOptionalAction) and --mamba-cache-mode."""
    from memprof.probes.serve_command import parse_tokens
    from memprof.probes.startup_log import parse_log

    log = parse_log("INFO 07-09 02:56:25 [api_utils.py:273] non-default args: {'max_model_len': "
                    "131072, 'kv_cache_dtype': 'fp8', 'enable_prefix_caching': True, "
                    "'max_num_seqs': 1}\n")
    assert log.settings["enable_prefix_caching"] is True
    on = parse_tokens(["vllm", "serve", "m", "--enable-prefix-caching", "--mamba-cache-mode",
                       "align"])
    assert on.settings == {"enable_prefix_caching": True, "mamba_cache_mode": "align"}
    assert parse_tokens(["vllm", "serve", "m", "--no-enable-prefix-caching"]
                        ).settings == {"enable_prefix_caching": False}


def test_the_estimate_states_the_mode_it_took() -> None:
    """The mode and the pages it gives are a note of the estimate; a Blackwell card states
    the CUDA-runtime assumption behind Gated DeltaNet's checkpoint block; off, no note."""
    def notes(*flags: str) -> list[str]:
        out = json.loads(_cli(*flags).stdout)["summary"]["notes"]
        return [n for n in out if "mamba_cache_mode" in n]

    h200 = notes()
    assert len(h200) == 1 and "'align', 3 state pages" in h200[0]
    assert "CUDA runtime" not in h200[0]
    b200 = completed(["estimate", "--model", QWEN3_NEXT, "--gpu", "B200", "-tp", "2", "-f",
                      "json"])
    assert b200.returncode == 0, b200.stderr
    assert any("CUDA runtime 13" in n for n in json.loads(b200.stdout)["summary"]["notes"])
    assert notes("--no-enable-prefix-caching") == []
    assert "'align', 2 state pages" in notes("--engine-version", "0.26.0")[0]
