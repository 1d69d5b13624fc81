"""vLLM's "non-default args: {…}" line as quotes show it: a dict with part of it elided
(``...``) still gives the settings it keeps (``memprof.probes.startup_log``)."""

from __future__ import annotations

from memprof.probes.startup_log import parse_log

_HEAD = "INFO 01-07 02:29:45 [api_server.py:1772] vLLM API server version 0.12.0\n"
_TAIL = ("\nINFO 01-07 02:31:42 [gpu_model_runner.py:3549] Model loading took 29.3114 GiB "
         "memory and 47.047321 seconds\n")


def _settings(args: str) -> dict[str, object]:
    log = parse_log(_HEAD + "INFO 01-07 02:29:45 [utils.py:253] non-default args: " + args
                    + _TAIL)
    return dict(log.settings)


def test_an_elided_dict_gives_the_pairs_it_keeps() -> None:
    got = _settings("{'model_tag': '/m/Qwen3-VL', 'trust_remote_code': True, 'dtype': "
                    "'bfloat16', 'max_model_len': 65536, ... 'tensor_parallel_size': 2, "
                    "'max_num_seqs': 64}")
    assert got["tp"] == 2
    assert got["max_model_len"] == 65536
    assert got["max_num_seqs"] == 64


def test_the_whole_dict_reads_the_same() -> None:
    whole = _settings("{'model': '/m/Qwen3-VL', 'max_model_len': 65536, "
                      "'tensor_parallel_size': 2, 'max_num_seqs': 64}")
    elided = _settings("{'model': '/m/Qwen3-VL', 'max_model_len': 65536, ..., "
                       "'tensor_parallel_size': 2, 'max_num_seqs': 64}")
    assert whole == elided


def test_a_value_cut_by_the_elision_is_not_read() -> None:
    # "'max_num_seqs': 6..." was cut mid-value: no pair of it is read
    got = _settings("{'tensor_parallel_size': 2, 'max_num_seqs': 6...}")
    assert got["tp"] == 2
    assert "max_num_seqs" not in got
