"""A V1 start-up failure quoted by its exception's last line alone places the log: the line
carries the tag of run_engine_core's logger.exception("EngineCore failed to start.") call
(vLLM's NewLineFormatter prefixes each line of the record with the call's header;
``memprof.probes.release_lines.STARTUP_TRACEBACK``)."""

from __future__ import annotations

from memprof.probes.release_lines import STARTUP_TRACEBACK, between, consistent, tags

# published row 150 (vLLM 0.22), verbatim
_ROW150 = ("(EngineCore pid=2739502) ERROR 06-03 14:24:40 [core.py:1165] ValueError: To serve at "
           "least one request with the model's max seq len (30000), (6.66 GiB KV cache is needed, "
           "which is larger than the available KV cache memory (5.44 GiB). Based on the available "
           "memory, the estimated maximum model length is 13528.")
# published row 309 (vLLM 0.17.1), verbatim but cut after the message's first sentence
_ROW309 = ("(EngineCore_DP0 pid=7954) ERROR 07-27 16:21:40 [core.py:1100] ValueError: No "
           "available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
           "initializing the engine.")
# 0.8.4's V1 "Model loading took" call sits at gpu_model_runner.py l.1291 (configs/
# vllm_log_lines.json); 0.8.4 logs a failed start under another message than 0.8.5's
_LOAD_084 = ("INFO 04-17 15:09:40 [gpu_model_runner.py:1291] Model loading took 15.52 GiB and "
             "3.1 seconds")


def test_the_traceback_line_is_tagged_as_the_failed_start_call() -> None:
    assert tags([_ROW150]) == (("core.py", 1165, STARTUP_TRACEBACK, True),)


def test_it_places_the_log_at_the_releases_of_that_call() -> None:
    assert consistent("vllm", tags([_ROW150])) == ["0.22.0", "0.22.1"]
    assert consistent("vllm", tags([_ROW309])) == ["0.17.0", "0.17.1"]


def test_a_release_before_the_message_is_not_ruled_out_by_it() -> None:
    # a 0.8.4 log: its load line places it, the traceback tag (no 0.8.4 line) is left out
    found = tags([_LOAD_084, _ROW150.replace("core.py:1165", "core.py:387")])
    assert consistent("vllm", found) == consistent("vllm", tags([_LOAD_084]))
    assert "0.8.4" in (consistent("vllm", found) or [])


def test_alone_and_held_by_no_release_it_is_as_no_tag() -> None:
    assert consistent("vllm", tags([_ROW150.replace("core.py:1165", "core.py:387")])) is None


def test_it_never_brackets_a_build() -> None:
    assert between("vllm", tags([_ROW150.replace("core.py:1165", "core.py:1170")])) is None


def test_another_error_line_is_no_tag() -> None:
    assert tags(["(EngineCore pid=1) ERROR 06-03 14:24:40 [core.py:1165] RuntimeError: CUDA "
                 "error: an illegal memory access was encountered"]) == ()
