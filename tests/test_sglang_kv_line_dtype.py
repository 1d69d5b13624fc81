"""SGLang's KV-pool line in both of its forms: up to early 2026 "KV Cache is allocated. #tokens:
N, K size: ..." (with a separate "Using KV cache dtype" line), and from SGLang main of about May
2026 (0.5.1x releases) "KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: ..."
(mem_cache/memory_pool.py, the change recorded as item 13 of SGLang's own clean-startup-log
skill). ``memprof explain`` reads the pool's token count from either; the lines below are quoted
from published rows 1455 and 401 (tests/data/published.json)."""

from __future__ import annotations

from memprof.base.units import GiB
from memprof.probes.startup_log import parse_log

NEW = ("[2026-08-27 03:45:54] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 392920, "
       "K size: 17.99 GB, V size: 17.99 GB\n"
       "[2026-08-27 03:45:54] Memory pool end. avail mem=12.70 GB\n")
OLD = ("[2026-04-10 23:19:05 TP0] Using KV cache dtype: torch.bfloat16\n"
       "[2026-04-10 23:19:05 TP0] KV Cache is allocated. #tokens: 2206208, K size: 67.33 GB, "
       "V size: 67.33 GB\n")
FP8 = ("[2026-09-12 00:22:48 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, "
       "#tokens: 454112, K size: 3.46 GB, V size: 3.46 GB\n")


def test_the_2026_line_with_its_dtype_gives_the_tokens() -> None:
    log = parse_log(NEW)
    assert log.engine == "sglang"
    assert log.figures["kv_tokens"].value == 392920
    assert abs(log.figures["k_bytes"].value - 17.99 * GiB) < 1
    assert abs(log.figures["avail_after_pool_bytes"].value - 12.70 * GiB) < 1


def test_an_fp8_pool_dtype_is_read_past_as_well() -> None:
    assert parse_log(FP8).figures["kv_tokens"].value == 454112


def test_the_older_line_still_gives_the_tokens() -> None:
    log = parse_log(OLD)
    assert log.figures["kv_tokens"].value == 2206208
    assert abs(log.figures["v_bytes"].value - 67.33 * GiB) < 1
