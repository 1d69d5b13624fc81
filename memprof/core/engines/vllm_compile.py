"""How vLLM compiles the model, where it changes the memory a start-up charges: the release rule
of a cold compile's autotuning example arguments (the term: memprof/core/terms/cold_compile.py,
whose docstring gives the sources and the published starts it sizes), and of what the budget
line can keep of that copy once it is freed (``COLD_COPY_PINNABLE``)."""

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

# Can the freed table copy stay in the budget, its segment kept past ``memory_profiling``'s
# closing ``empty_cache()`` by a live block a later allocation of the window carved out of it?
# Before 0.27.0 the budget line charges no reserved memory (non-torch = CUDA memory - torch
# reserved; the copy counts once, in the torch peak); 0.27.0 charges ``total_consumed``, the drop
# in free memory, which holds such a segment whole; from 0.31.0 the profile run runs under
# ``max_split_size_mb:20``, and PyTorch's allocator then serves no request smaller than 20 MiB
# from a free block of 20 MiB or more and none larger from a block 20 MiB or more above it
# (CUDACachingAllocator ``get_free_block``, ``max_non_split_rounding_size`` at its 20 MiB
# default; memprof.alloc.allocator), so no allocation short of the copy's size less 20 MiB can
# be carved out of it. Which allocation pins it in the published 0.27.1-0.30.0 cold starts is not
# read, so nothing is charged (docs/model-runner-v2.md, "The cold start's second table").
COLD_COPY_PINNABLE: tuple[Rule, ...] = (
    Rule(name="cold_copy_pinnable",
         changes="consumed memory: the cold compile's freed table copy, pinned (not charged)",
         since="0.20.0", until="0.27.0", value=False,
         introduced_by="the table copy (cold_compile_example_args); the budget line reads no "
         "reserved memory",
         removed_by="0.27.0 memory_profiling: non_kv_cache_memory = total_consumed + "
         "transient_peak_headroom",
         source="0.23.0 / 0.24.0 / 0.25.0 / 0.26.0 utils/mem_utils.py memory_profiling: "
         "non_torch_memory = cuda_memory - torch_memory (reserved)"),
    Rule(name="cold_copy_pinnable",
         changes="consumed memory: the cold compile's freed table copy, pinned (not charged)",
         since="0.27.0", until="0.31.0", value=True,
         introduced_by="0.27.0 memory_profiling: total_consumed = before_create.free_memory - "
         "after_profile.free_memory",
         removed_by="0.31.0 Worker.determine_available_memory: "
         "_scoped_allocator_max_split(max_split_size_mb=20) around profile_run (PR not "
         "identified)",
         source="0.27.1 / 0.28.0 / 0.29.0 / 0.30.0 utils/mem_utils.py memory_profiling and "
         "v1/worker/gpu_worker.py determine_available_memory (profile_run at PyTorch's "
         "default, no split limit)"),
    Rule(name="cold_copy_pinnable",
         changes="consumed memory: the cold compile's freed table copy, pinned (not charged)",
         since="0.31.0", until=None, value=False,
         introduced_by="0.31.0 v1/worker/gpu_worker.py Worker.determine_available_memory: "
         "_scoped_allocator_max_split(max_split_size_mb=20) inside memory_profiling around "
         "profile_run ('a later small allocation can be carved out of a freed multi-GiB block "
         "and pin the whole segment past the empty_cache() in memory_profiling'); absent from "
         "the 0.30.0 wheel; PR not identified",
         source="0.31.0 v1/worker/gpu_worker.py determine_available_memory, "
         "_scoped_allocator_max_split (CUDA and ROCm, the native allocator backend only); "
         "PyTorch CUDACachingAllocator get_free_block (memprof.alloc.allocator)"),
)

RULES: tuple[tuple[Rule, ...], ...] = (COLD_COMPILE_EXAMPLE_ARGS, COLD_COPY_PINNABLE)
