"""The pytest plugin (marker memprof_budget) and memprof.budget.assert_fits."""

from __future__ import annotations

import pytest

from memprof.base.errors import BadInput
from memprof.budget import assert_fits, check_budget

pytest_plugins = ["pytester"]

H100_TOTAL = 85017493504  # configs/gpus.json
GiB = 1 << 30
# the inner runs need only our plugin; benchmark calibration would cost ~0.5 s a run
QUIET = ("-p", "no:benchmark", "-p", "no:hypothesispytest", "-p", "no:cacheprovider")


def test_marker_passing_and_failing_budgets(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.memprof_budget(model="llama-3.1-8b", gpu="H100", max_num_seqs=256,
                                    max_model_len=32768, max_weights_bytes="16GiB",
                                    max_peak_bytes={H100_TOTAL}, min_kv_tokens=1_000,
                                    verdict="fits")
        def test_within_budget():
            pass

        @pytest.mark.memprof_budget(model="llama-3.1-8b", gpu="H100", max_num_seqs=256,
                                    max_weights_bytes="8GiB", min_kv_tokens=10_000_000)
        def test_over_budget():
            raise RuntimeError("the body must not run when the budget is broken")
    """)
    result = pytester.runpytest("--strict-markers", *QUIET)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*memprof budget broken: llama-3.1-8b on 1× H100-80GB*",
        "*weights * on rank 0 (tp 0 pp 0 dp 0) > max_weights_bytes 8.00 GiB*",
        "*kv_cache_tokens * < min_kv_tokens 10,000,000*",
        "*largest components: *weights: *",
    ])
    assert "the body must not run" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_marker_positional_model_fixture_and_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.memprof_budget("qwen3-32b", gpu="H200", kv_cache_dtype="turboquant_k8v4",
                                    gpu_memory_utilization=0.9, max_num_seqs=256)
        def test_fixture(memprof_estimate):
            assert memprof_estimate["model"]["name"] == "qwen3-32b"
            assert memprof_estimate["deployment"]["kv_cache_dtype"] == "turboquant_k8v4"

        @pytest.mark.memprof_budget(model="llama-3.1-8b", tensor_paralel_size=2)
        def test_typo():
            pass

        def test_fixture_without_marker(memprof_estimate):
            pass
    """)
    result = pytester.runpytest(*QUIET)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["error: memprof budget: unknown key 'tensor_paralel_size'",
                                 "hint: did you mean 'tensor_parallel_size'?*"])
    result.stdout.fnmatch_lines(["*needs a @pytest.mark.memprof_budget*"])
    assert "During handling" not in result.stdout.str()


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers", *QUIET)
    result.stdout.fnmatch_lines(["*@pytest.mark.memprof_budget(model, gpu=None*"])


def test_assert_fits_returns_the_estimate() -> None:
    est = assert_fits("llama-3.1-8b", gpu="H100", max_num_seqs=256, max_model_len=32768,
                      min_kv_tokens=1_000, max_weights_bytes="16GiB", max_peak_bytes=H100_TOTAL)
    assert est["summary"]["verdict"] == "fits"
    assert est["deployment"]["max_num_seqs"] == 256


def test_assert_fits_message_names_every_broken_limit() -> None:
    with pytest.raises(AssertionError) as info:
        assert_fits("llama-3.1-8b", gpu="H100", min_kv_tokens=10**9, max_weights_bytes=GiB,
                    max_peak_bytes="1GiB")
    text = str(info.value)
    assert text.startswith("memprof budget broken: llama-3.1-8b on 1× H100-80GB")
    assert "> max_weights_bytes 1.00 GiB" in text
    assert "> max_peak_bytes 1.00 GiB" in text
    assert "< min_kv_tokens 1,000,000,000" in text


def test_a_startup_oom_breaks_the_default_verdict() -> None:
    report = check_budget("llama-3.1-8b", gpu_memory="17GiB", gpu_arch="sm90")
    assert not report.ok
    assert any(v.startswith("verdict startup_oom, expected fits") for v in report.violations)
    assert check_budget("llama-3.1-8b", gpu_memory="17GiB", gpu_arch="sm90",
                        verdict="startup_oom").ok


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"verdict": "ok"}, "verdict must be one of"),
    ({"min_kv_tokens": "many"}, "min_kv_tokens must be an integer"),
    ({"max_peak_bytes": -1}, "max_peak_bytes must be a size"),
    ({"tpp": 2}, "unknown key 'tpp'"),
])
def test_bad_budget_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        check_budget("llama-3.1-8b", **kwargs)  # type: ignore[arg-type]

