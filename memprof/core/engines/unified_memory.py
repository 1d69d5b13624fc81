"""The engines on an integrated GPU that shares the host's memory (GB10 / DGX Spark): the free
memory their budgets read is the host's, so the output states what memprof cannot size there.

vLLM. From 0.11.1 vLLM's ``MemorySnapshot.measure`` (utils/mem_utils.py) replaces the free memory
``torch.cuda.mem_get_info`` reports with ``psutil.virtual_memory().available`` (the kernel's
MemAvailable) on a unified-memory part: by compute capability (8.7, 11.0, 12.1: Orin, Thor, Spark)
in 0.11.1-0.19.1, by ``current_platform.is_integrated_gpu`` (torch's ``is_integrated``, PR #35356)
from 0.20.0. The total stays ``mem_get_info``'s. Two things follow for the budget of
``Worker.determine_available_memory``:

- the start-up check compares ``total × gpu_memory_utilization`` with the host's available memory
  (what every other process and the page cache leave), not with a card's free memory;
- the profile's non-torch increase is the growth of ``total − available − torch's reserved``
  between the worker's first snapshot and the end of the profile run: memory the engine process
  takes on the host side during model load and profiling (its Python heap, torch.compile and its
  compile workers, pinned buffers) and whatever other processes take meanwhile is charged to the
  engine, and the KV cache is that much smaller than on a discrete card.

Neither is set by the engine's source: it is the host's behaviour during start-up, so memprof does
not size it and says so (one note on the estimate, ``unified_memory_notes``). Read in the 0.11.0
(absent), 0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.19.0, 0.19.1 (capability list), 0.20.0 and 0.33.0
(``is_integrated``) wheels; the calibration case is published row 503 (gpt-oss-20b on a GB10,
NVIDIA's 0.13.0 build: memprof's KV +11.3% above the log's, whose log prints neither the host's
memory nor the total, so its KV figure is left uncompared: ``memprof_run.unstated``).

Before those releases the free memory is ``torch.cuda.mem_get_info``'s, and on an integrated part
that is host state as well: CUDA's ``cuMemGetInfo`` returns the memory "free according to the OS"
(the integrated GPU shares it with the CPU: CUDA driver API reference), the kernel's free memory
without its reclaimable page cache (the comment above vLLM 0.11.1's psutil read: "the
cudaMemGetInfo function shows the amount of free system memory rather than what's actually
available"). The same two budget terms then also hold the page cache the load fills; an estimate
on an integrated card at such a release says so (``unified_memory_notes``), sizing nothing.

SGLang. From 0.5.4 ``get_available_gpu_memory`` (srt/utils/common.py) returns
``psutil.virtual_memory().available`` on the same parts: by SM (87, 110, 121) in 0.5.4-0.5.8, by
``torch.cuda.get_device_properties(gpu_id).is_integrated`` from 0.5.9. Both readings of the pool
size (``profile_max_num_token``: free after the load - (1 - mem_fraction_static) x free before it)
are then the host's: the pool is a fraction of what the host has free at start-up, less what the
host takes during the load, rather than of the card's total. Read in the 0.5.1-0.5.3 (absent),
0.5.4-0.5.8 (SM list) and 0.5.9 (``is_integrated``) wheels.
"""

from __future__ import annotations

from memprof.core.gpus import GPU
from memprof.core.versions import Rule, split_generation, value_at

# compute capabilities vLLM 0.11.1-0.19.1 treats as shared system memory
# (utils/mem_utils.py shared_sysmem_device_mem_sms: Orin, Thor, Spark)
UMA_CAPABILITIES = ("8.7", "11.0", "12.1")

# value: how the release recognises a unified-memory part ("capability": UMA_CAPABILITIES;
# "integrated": the card's ``GPU.integrated``)
UMA_FREE_MEMORY: tuple[Rule, ...] = (
    Rule(name="uma_free_memory", changes="free memory on a unified-memory GPU: the host's "
         "available memory (start-up check, profile's non-torch increase; stated, not sized)",
         since="0.11.1", until="0.20.0", value="capability",
         introduced_by="MemorySnapshot reads psutil on Orin/Thor/Spark (first released in "
         "0.11.1)", removed_by="#35356 (is_integrated, first released in 0.20.0)",
         source="0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.19.0, 0.19.1 utils/mem_utils.py "
         "MemorySnapshot.measure: free_memory = psutil.virtual_memory().available when "
         "current_platform.get_device_capability() is in ((8, 7), (11, 0), (12, 1)); 0.11.0 "
         "reads torch.cuda.mem_get_info alone", generation="v1"),
    Rule(name="uma_free_memory", changes="free memory on a unified-memory GPU: the host's "
         "available memory (start-up check, profile's non-torch increase; stated, not sized)",
         since="0.20.0", until=None, value="integrated",
         introduced_by="#35356 (is_integrated, first released in 0.20.0)",
         source="0.20.0, 0.33.0 utils/mem_utils.py MemorySnapshot.measure: free_memory = "
         "psutil.virtual_memory().available when current_platform.is_integrated_gpu() "
         "(platforms/cuda.py: torch.cuda.get_device_properties(device).is_integrated)",
         generation="v1"),
)


SGLANG_UMA_FREE_MEMORY: tuple[Rule, ...] = (
    Rule(name="sglang_uma_free_memory", changes="free memory on a unified-memory GPU: the "
         "host's available memory (both readings of the pool size; stated, not sized)",
         since="0.5.4", until="0.5.9", value="capability", engine="sglang",
         introduced_by="get_available_gpu_memory reads psutil on Orin/Thor/Spark (first read "
         "in 0.5.4)", removed_by="is_integrated (first read in 0.5.9)",
         source="sglang 0.5.4 - 0.5.8 srt/utils/common.py get_available_gpu_memory: "
         "SHARED_SYSMEM_DEVICE_MEM_SMS = (87, 110, 121); free_gpu_memory = "
         "psutil.virtual_memory().available when get_device_sm() is in it; 0.5.3 reads "
         "torch.cuda.mem_get_info alone"),
    Rule(name="sglang_uma_free_memory", changes="free memory on a unified-memory GPU: the "
         "host's available memory (both readings of the pool size; stated, not sized)",
         since="0.5.9", until=None, value="integrated", engine="sglang",
         introduced_by="is_integrated (first read in 0.5.9)",
         source="sglang 0.5.9 srt/utils/common.py get_available_gpu_memory: free_gpu_memory = "
         "psutil.virtual_memory().available when torch.cuda.get_device_properties(gpu_id)."
         "is_integrated"),
)


def reads_host_memory(gpu: GPU, version: str | None, engine: str = "vllm") -> bool:
    """Whether ``engine`` at ``version`` reads ``gpu``'s free memory as the host's available
    memory."""
    rows = SGLANG_UMA_FREE_MEMORY if engine == "sglang" else UMA_FREE_MEMORY
    how = value_at(rows, version, engine=engine)
    if how == "capability":
        return gpu.compute_capability in UMA_CAPABILITIES
    return how == "integrated" and gpu.integrated


def unified_memory_notes(version: str | None, gpu: GPU) -> list[str]:
    """The note a vLLM estimate carries where ``version`` reads ``gpu``'s free memory as the
    host's (``UMA_FREE_MEMORY``); none elsewhere."""
    release = split_generation(version or "")[0]
    if not reads_host_memory(gpu, version):
        return _os_free_note(gpu, f"vLLM {release}") if gpu.integrated else []
    return [f"{gpu.name} shares the host's memory: vLLM {release} reads its free memory as the "
            "host's available memory (utils/mem_utils.py MemorySnapshot.measure), so memory the "
            "host takes during model load and the profile run (the engine's Python heap and "
            "torch.compile workers, other processes) counts as non-torch and comes out of the KV "
            "cache; memprof does not size it (its KV figure is an upper bound), and the start-up "
            "check needs the budget free on the host"]


def sglang_unified_memory_notes(version: str | None, gpu: GPU) -> list[str]:
    """The note an SGLang estimate carries where ``version`` reads ``gpu``'s free memory as the
    host's (``SGLANG_UMA_FREE_MEMORY``); none elsewhere."""
    if not reads_host_memory(gpu, version, engine="sglang"):
        return _os_free_note(gpu, f"SGLang {version}") if gpu.integrated else []
    return [f"{gpu.name} shares the host's memory: SGLang {version} reads its free memory as the "
            "host's available memory (srt/utils/common.py get_available_gpu_memory), so the KV "
            "pool is sized from what the host has free at start-up, less what the host takes "
            "during the load, not from the card's total; memprof does not size either (its KV "
            "figure is an upper bound)"]


def _os_free_note(gpu: GPU, engine: str) -> list[str]:
    """The note of an integrated ``gpu`` at a release that reads ``torch.cuda.mem_get_info``'s
    free memory: on such a part that is the OS's free memory (CUDA's ``cuMemGetInfo``), without
    the page cache the checkpoint's read fills."""
    return [f"{gpu.name} shares the host's memory: {engine} reads its free memory from "
            "torch.cuda.mem_get_info, which on an integrated GPU is what the OS has free, page "
            "cache excluded (CUDA's cuMemGetInfo), so memory the host takes during model load "
            "and the profile run (the checkpoint's page cache, the engine's own host "
            "allocations, other processes) comes out of the KV cache; memprof does not "
            "size it (its KV figure is an upper bound)"]
