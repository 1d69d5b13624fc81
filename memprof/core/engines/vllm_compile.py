"""How vLLM compiles the model, where it changes the memory a start-up charges: the release rule
of a cold compile's autotuning example arguments (the term: memprof/core/terms/cold_compile.py,
whose docstring gives the sources and the published starts it sizes)."""

from __future__ import annotations

from memprof.core.versions import Rule

COLD_COMPILE_EXAMPLE_ARGS: tuple[Rule, ...] = (
    Rule(name="cold_compile_example_args",
         changes="profile-run peak: a cold compile's autotuning example arguments",
         since="0.20.0", until=None,
         introduced_by="InductorStandaloneAdaptor (VLLM_USE_STANDALONE_COMPILE on by default "
         "but in 0.11.0, with torch >= 2.8: from 0.10.2); torch standalone_compile patches "
         "triton.autotune_at_compile_time; charged from 0.20.0 (torch 2.11), the torch of the "
         "earliest cold log that shows it (0.24.0)",
         source="vLLM 0.20.0 / 0.24.0 / 0.27.1 / 0.28.0 compilation/compiler_interface.py "
         "InductorStandaloneAdaptor.compile; torch/_inductor/standalone_compile.py; "
         "torch/_inductor/codegen/wrapper.py generate_example_arg_value; measured on an H200 "
         "with torch 2.11: reports/gpu/cold-compile-window/ (set d)"),
)

RULES: tuple[tuple[Rule, ...], ...] = (COLD_COMPILE_EXAMPLE_ARGS,)
