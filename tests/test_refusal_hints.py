"""A refusal's hint gives a value the same setting accepts: a value read as text and refused names
an example that, passed back, is read, and the symmetric-memory switch's hint names both of its
values (VLLM_ALLREDUCE_USE_SYMM_MEM is 0 or 1)."""

from __future__ import annotations

import re

import pytest

from memprof.base.errors import BadInput
from memprof.cli import run
from memprof.core.flags import BY_FIELD, coerce

TEXT_KINDS = ("int", "float", "bool", "tokens")  # a size refusal lists its forms


@pytest.mark.parametrize("field", sorted(f for f, s in BY_FIELD.items() if s.kind in TEXT_KINDS))
def test_the_hint_of_a_bad_text_value_is_a_value_the_setting_reads(field: str) -> None:
    with pytest.raises(BadInput) as err:
        coerce(field, "not-a-value", where="x")
    hint = err.value.hint or ""
    m = re.fullmatch(rf"e\.g\. {field}=(.+)", hint)
    assert m, hint
    coerce(field, m.group(1), where="x")  # raises if the example is not a value


@pytest.mark.parametrize("value", ["true", "yes", ""])
def test_a_pasted_symm_mem_word_is_refused_with_a_value_the_switch_takes(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "--gpu", "H100", "--", f"VLLM_ALLREDUCE_USE_SYMM_MEM={value}", "vllm",
            "serve", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"]
    assert run(argv) == 2
    err = capsys.readouterr()[1]
    hint = re.search(r"hint: e\.g\. vllm_allreduce_use_symm_mem=(\S+)", err)
    assert hint, err
    argv[4] = f"VLLM_ALLREDUCE_USE_SYMM_MEM={hint.group(1)}"
    assert run(argv) in (0, 1)


def test_any_nonzero_symm_mem_integer_is_on_as_vllm_reads_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM 0.11.0 envs.py: bool(int(os.getenv("VLLM_ALLREDUCE_USE_SYMM_MEM", "1")))
    outs = []
    for value in ("1", "2", "-1"):
        assert run(["estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100",
                    "--tp", "2", "--vllm-allreduce-use-symm-mem", value, "-f", "json"]) in (0, 1)
        out = capsys.readouterr()[0]
        outs.append(out.replace(f'"vllm_allreduce_use_symm_mem": {value}', ""))
    assert outs[0] == outs[1] == outs[2]
