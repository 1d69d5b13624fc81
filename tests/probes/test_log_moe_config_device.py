"""The card vLLM's and SGLang's fused-MoE and W8A8 block-FP8 config lookups name
(``memprof/probes/moe_config_device.py``,
``memprof.probes.log_deployment.card_named_by_moe_lookup``): the lookup's forms per release, the
``device_name`` mapped to the catalog by the driver's name, explain rebuilding on it (at the total
the log prints, which it checks), a name that is no one catalog card left with a note, and
nothing written there crashing explain."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memprof.base.units import GiB
from memprof.core.gpus import find_gpu
from memprof.probes.log_deployment import card_named_by_moe_lookup, rebuild
from memprof.probes.moe_config_device import (
    driver_spelling,
    gemm_lookup_devices,
    moe_lookup_devices,
)
from memprof.probes.startup_log import parse_log
from tests.probes.test_log_gpu_names import _explain

# vLLM V1 figures with no GPU total (the card is not shown by them)
FIGURES = ("INFO 07-20 10:00:00 [gpu_model_runner.py:1770] Model loading took 15.27 GiB and 3.2 "
           "seconds\n"
           "INFO 07-20 10:00:05 [gpu_worker.py:232] Available KV cache memory: 20.00 GiB\n"
           "INFO 07-20 10:00:05 [kv_cache_utils.py:716] GPU KV cache size: 145,000 tokens\n")
# vLLM 0.27+'s budget line: the total torch reported (79.25 GiB: the A100 PCIe's catalog total)
TOTAL = ("INFO 08-05 12:13:40 [gpu_worker.py:789] Free memory on device (78.80/79.25 GiB) on "
         "startup. Desired GPU memory utilization is (0.9, 71.33 GiB).\n")
CFG = "/venv/lib/python3.12/site-packages/vllm/model_executor/layers/fused_moe/configs/"


def _found(dev: str) -> str:  # get_moe_configs' info line, every release read (0.6.3-0.30.0)
    return (f"INFO 08-05 12:13:35 [fused_moe.py:720] Using configuration from {CFG}E=128,N=768,"
            f"device_name={dev}.json for MoE layer.\n")


# get_moe_configs' warning: one path (0.6.3-0.10.0), the list of paths tried (0.10.1-0.12.0),
# the paths joined by ", " (0.20.2, 0.30.0)
MISSED = {
    "0.10.0": ("WARNING 08-16 02:14:05 [fused_moe.py:695] Using default MoE config. Performance "
               f"might be sub-optimal! Config file not found at {CFG}E=16,N=1536,device_name="
               "NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json\n"),
    "0.12.0": ("WARNING 04-27 15:09:41 [fused_moe.py:888] Using default MoE config. Performance "
               f"might be sub-optimal! Config file not found at ['/tuned/E=128,N=768,device_name="
               f"NVIDIA_H100_80GB_HBM3.json', '{CFG}E=128,N=768,device_name="
               "NVIDIA_H100_80GB_HBM3.json']\n"),
    "0.20.2": ("WARNING 05-15 02:16:07 [fused_moe.py:1091] Using default MoE config. Performance "
               f"might be sub-optimal! Config file not found at /tuned/E=128,N=768,device_name="
               f"NVIDIA_H100_80GB_HBM3.json, {CFG}E=128,N=768,device_name="
               "NVIDIA_H100_80GB_HBM3.json\n"),
}


def test_the_lookup_forms_per_release() -> None:
    for release, line in MISSED.items():
        assert moe_lookup_devices(line.splitlines()) == ("NVIDIA_H100_80GB_HBM3",), release
    assert moe_lookup_devices([_found("NVIDIA_A100-SXM4-80GB")]) == ("NVIDIA_A100-SXM4-80GB",)
    # a device_name elsewhere (a path in prose, another kernel's lookup) or cut short is not read
    assert moe_lookup_devices([f"see {CFG}E=8,N=14336,device_name=NVIDIA_H200.json"]) == ()
    assert moe_lookup_devices(["Using default MoE config. Performance might be sub-optimal! "
                               "Config file not found at .../E=16,N=1536,device_name="
                               "NVIDIA_H100_80GB_HBM3..."]) == ()


SG = "/sgl-workspace/sglang/python/sglang/srt/layers/"
H100 = "NVIDIA_H100_80GB_HBM3"
# SGLang's fused-MoE lookup lines (get_moe_configs: fused_moe_triton/fused_moe.py in 0.4.3 and
# 0.4.9, fused_moe_triton_config.py in 0.5.3 and 0.5.10): the file name's block shape is the
# Python list, with its space
SG_MOE = {
    "0.4.3 found": (f"[2025-02-19 16:39:11 TP0] Using configuration from {SG}moe/fused_moe_triton/"
                    f"configs/E=256,N=256,device_name={H100},dtype=fp8_w8a8,block_shape=[128, "
                    "128].json for MoE layer."),
    "0.4.3 missed": ("[2025-02-19 16:39:11 TP0] Using default MoE config. Performance might be "
                     f"sub-optimal! Config file not found at {SG}moe/fused_moe_triton/configs/"
                     f"E=128,N=768,device_name={H100}.json"),
    "0.4.9 found": (f"[2025-07-10 08:00:00 TP0] Using MoE kernel config from {SG}moe/"
                    f"fused_moe_triton/configs/triton_3_3_1/E=128,N=768,device_name={H100}.json."),
    "0.5.3 fallback": (f"[2025-10-01 08:00:00 TP1] Config file not found at {SG}moe/"
                       f"fused_moe_triton/configs/triton_3_4_0/E=128,N=768,device_name={H100}"
                       ".json. Fallback to triton version 3.3.1 and use MoE kernel config from "
                       f"{SG}moe/fused_moe_triton/configs/triton_3_3_1/E=128,N=768,device_name="
                       f"{H100}.json. Performance might be sub-optimal!"),
    "0.5.3 missed": ("[2025-10-01 08:00:00] Using default MoE kernel config. Performance might be "
                     f"sub-optimal! Config file not found at {SG}moe/fused_moe_triton/configs/"
                     f"triton_3_4_0/E=128,N=768,device_name={H100}.json, you can create them "
                     "with https://github.com/sgl-project/sglang/tree/main/benchmark/kernels/"
                     "fused_moe_triton"),
    "0.5.10 down_moe": ("[2026-03-01 08:00:00] Using MoE kernel config with down_moe=False. "
                        "Performance might be sub-optimal! Config file not found at "
                        f"{SG}moe/fused_moe_triton/configs/triton_3_5_1/E=128,N=768,device_name="
                        f"{H100}_down.json, you can create them with https://github.com/"
                        "sgl-project/sglang/tree/main/benchmark/kernels/fused_moe_triton"),
    "0.5.23 down": (f"[2026-11-01 08:00:00] Down MoE config file not found at {SG}moe/moe_runner/"
                    f"triton_utils/configs/triton_3_6_0/E=128,N=768,device_name={H100}_down.json"
                    "; reusing the tuned up-projection config without TMA. Performance might be "
                    "sub-optimal."),
}
# the W8A8 block-FP8 GEMM lookup lines: SGLang's (fp8_kernel.py, 0.4.3-0.5.10; its INT8 twin in
# int8_kernel.py) and vLLM's (fp8_utils.py get_w8a8_block_fp8_configs, block shape without space)
VCFG = "/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/utils/configs/"
GEMM = {
    "sglang found": (f"[2025-01-31 11:43:06 TP7] Using configuration from {SG}quantization/configs/"
                     f"N=4096,K=512,device_name={H100},dtype=fp8_w8a8,block_shape=[128, 128]"
                     ".json for W8A8 Block FP8 kernel."),
    "sglang missed": ("[2026-08-27 03:45:56] Using default W8A8 Block FP8 kernel config. "
                      "Performance might be sub-optimal! Config file not found at "
                      f"{SG}quantization/configs/N=5120,K=2048,device_name={H100},dtype=fp8_w8a8,"
                      "block_shape=[128, 128].json"),
    "sglang int8": ("[2025-07-10 08:00:00] Using default W8A8 Block INT8 kernel config. "
                    "Performance might be sub-optimal! Config file not found at "
                    f"{SG}quantization/configs/N=5120,K=2048,device_name={H100},dtype=int8_w8a8,"
                    "block_shape=[128, 128].json"),
    "sglang 0.5.23 channelwise": ("[2026-11-01 08:00:00] Using configuration from /sgl-workspace/"
                                  "sglang/python/sglang/kernels/ops/gemm/configs/N=5120,K=2048,"
                                  f"device_name={H100},dtype=fp8_w8a8_channelwise.json for W8A8 "
                                  "channelwise FP8 GEMM."),
    "vllm found": ("INFO 03-01 10:00:00 [fp8_utils.py:600] Using configuration from "
                   f"{VCFG}N=7168,K=256,device_name={H100},dtype=fp8_w8a8,block_shape=[128,128]"
                   ".json for W8A8 Block FP8 kernel."),
    "vllm missed": ("WARNING 03-01 10:00:00 [fp8_utils.py:610] Using default W8A8 Block FP8 "
                    "kernel config. Performance might be sub-optimal! Config file not found at "
                    f"{VCFG}N=7168,K=256,device_name={H100},dtype=fp8_w8a8,block_shape=[128,128]"
                    ".json"),
}


def test_sglangs_and_the_gemms_lookup_forms() -> None:
    for form, line in SG_MOE.items():
        assert moe_lookup_devices([line]) == (H100,), form
        assert gemm_lookup_devices([line]) == (), form
    for form, line in GEMM.items():
        assert gemm_lookup_devices([line]) == (H100,), form
        assert moe_lookup_devices([line]) == (), form
        notes: list[str] = []
        g = card_named_by_moe_lookup(parse_log(line + "\n" + FIGURES), notes)
        assert g is not None and g.name == "H100-80GB", form
        assert notes[0].startswith("GPU: H100-80GB, as the log's W8A8 block-FP8 kernel config "
                                   "lookup names it"), notes
    # cut short (a quote's '...'), another kernel's lookup, or the path alone: not read
    cut = GEMM["sglang missed"].replace(f"{H100},dtype=fp8_w8a8,block_shape=[128, 128].json",
                                        "NVIDIA_H100_80GB...")
    assert gemm_lookup_devices([cut]) == ()
    assert gemm_lookup_devices(["Using default W8A16 kernel config. Config file not found at "
                                f"N=1,K=2,device_name={H100}.json"]) == ()
    assert gemm_lookup_devices([f"{VCFG}N=7168,K=256,device_name={H100},dtype=fp8_w8a8"]) == ()


def test_the_h200_family_name_is_vllms_moe_lookups_alone() -> None:
    """vLLM 0.12.0+ writes NVIDIA_H200 for the H200 family in its fused-MoE lookup only
    (fused_moe.py get_config_file_name); its GEMM lookup (fp8_utils.py) and SGLang (get_device_name,
    0.4.3-0.5.10) write the driver's name."""
    v020 = "INFO 05-15 02:14:23 [api_server.py:1896] vLLM API server version 0.20.2\n"
    nvl = GEMM["vllm missed"].replace(H100, "NVIDIA_H200_NVL") + "\n"
    # the MoE line's family name and the GEMM line's H200 NVL: one card, the NVL, no conflict
    notes: list[str] = []
    g = card_named_by_moe_lookup(parse_log(v020 + _found("NVIDIA_H200") + nvl + FIGURES), notes)
    assert g is not None and g.name == "H200-NVL", notes
    assert notes[0].startswith("GPU: H200-NVL, as the log's W8A8 block-FP8 kernel config lookup "
                               "names it ('device_name=NVIDIA_H200_NVL'"), notes
    assert "H200 family" not in notes[0], notes
    # a GEMM line naming the H200 itself: no family note
    h200 = GEMM["vllm missed"].replace(H100, "NVIDIA_H200") + "\n"
    notes = []
    g = card_named_by_moe_lookup(parse_log(v020 + _found("NVIDIA_H200") + h200 + FIGURES), notes)
    assert g is not None and g.name == "H200" and "H200 family" not in notes[0], notes
    notes = []
    g = card_named_by_moe_lookup(parse_log(v020 + h200 + FIGURES), notes)
    assert g is not None and g.name == "H200" and "H200 family" not in notes[0], notes
    # the family name alone: the H200, said
    notes = []
    assert card_named_by_moe_lookup(parse_log(v020 + _found("NVIDIA_H200") + FIGURES), notes)
    assert "H200 family" in notes[0], notes
    # an H100 beside the family name: two cards, left with a note
    notes = []
    h100 = GEMM["vllm missed"] + "\n"
    assert card_named_by_moe_lookup(parse_log(v020 + _found("NVIDIA_H200") + h100 + FIGURES),
                                    notes) is None
    assert "H100-80GB and H200" in notes[0], notes
    # SGLang's NVIDIA_H200 is the H200's own name (its lines are read as SGLang's by the
    # ServerArgs line)
    sg = ("[2026-08-27 03:45:24] server_args=ServerArgs(model_path='Qwen/Qwen3-30B-A3B-FP8', "
          "mem_fraction_static=0.83)\n" + SG_MOE["0.5.3 missed"].replace(H100, "NVIDIA_H200")
          + "\n")
    log = parse_log(sg + "[2026-08-27 03:45:40] Load weight end. type=Qwen3MoeForCausalLM, "
                    "dtype=torch.bfloat16, avail mem=48.62 GiB, mem usage=30.18 GiB.\n")
    assert log.engine == "sglang"
    notes = []
    g = card_named_by_moe_lookup(log, notes)
    assert g is not None and g.name == "H200" and "H200 family" not in notes[0], notes


def test_the_device_name_maps_by_the_drivers_name() -> None:
    """The driver's names (torch.cuda.get_device_name / nvidia-smi) with underscores for spaces
    (fused_moe.py get_config_file_name) resolve to the catalog's cards."""
    for dev, card in (("NVIDIA_A100-SXM4-80GB", "A100-80GB"),
                      ("NVIDIA_A100_80GB_PCIe", "A100-PCIe-80GB"),
                      ("NVIDIA_H100_80GB_HBM3", "H100-80GB"), ("NVIDIA_H100_PCIe", "H100-PCIe"),
                      ("NVIDIA_H200", "H200"), ("NVIDIA_B200", "B200"),
                      ("NVIDIA_B300_SXM6_AC", "B300"), ("NVIDIA_L40S", "L40S"),
                      ("NVIDIA_GeForce_RTX_4090", "RTX-4090"), ("AMD_Instinct_MI300X", "MI300X"),
                      ("NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", "RTX-PRO-6000"),
                      # more names of vLLM's fused_moe/configs file names
                      ("NVIDIA_A100-PCIe-40GB", "A100-PCIe-40GB"), ("NVIDIA_H100_NVL", "H100-NVL"),
                      ("NVIDIA_H20-3e", "H20-3e"), ("NVIDIA_L20", "L20"), ("NVIDIA_A10", "A10"),
                      ("AMD_Instinct_MI325X", "MI325X"),
                      ("NVIDIA_GeForce_RTX_2080_Ti", "RTX-2080-Ti")):
        assert find_gpu(driver_spelling(dev)).name == card, dev
        notes: list[str] = []
        g = card_named_by_moe_lookup(parse_log(_found(dev) + FIGURES), notes)
        assert g is not None and g.name == card
        assert notes[0].startswith(f"GPU: {card}, as the log's fused-MoE config lookup names it")


def test_explain_rebuilds_on_the_named_card_at_the_logged_total() -> None:
    """The A100 SXM the lookup names, at the 79.25 GiB the log prints (the A100 PCIe's catalog
    total, which the total alone would take): the named card wins, on the total the engine saw."""
    rb = rebuild(parse_log(_found("NVIDIA_A100-SXM4-80GB") + FIGURES + TOTAL), model="qwen3-8b",
                 gpu=None, gpu_memory=None)
    assert rb.gpu.name == "A100-80GB" and abs(rb.gpu.total_bytes - 79.25 * GiB) <= 1
    assert any(n.startswith("GPU: A100-80GB (the log's fused-MoE config lookup) at the 79.25 "
                            "GiB total") for n in rb.notes), rb.notes
    without = rebuild(parse_log(FIGURES + TOTAL), model="qwen3-8b", gpu=None, gpu_memory=None)
    assert without.gpu.name == "A100-PCIe-80GB"
    # with no total, the catalog's; --gpu wins over the name
    rb = rebuild(parse_log(_found("NVIDIA_L40S") + FIGURES), model="qwen3-8b", gpu=None,
                 gpu_memory=None)
    assert rb.gpu == find_gpu("L40S")
    rb = rebuild(parse_log(_found("NVIDIA_L40S") + FIGURES), model="qwen3-8b", gpu="A40",
                 gpu_memory=None)
    assert rb.gpu.name == "A40"


def test_a_conflict_is_said() -> None:
    # a total far from the named card's: taken, and the note asks to check
    rb = rebuild(parse_log(_found("NVIDIA_H200") + FIGURES + TOTAL), model="qwen3-8b",
                 gpu=None, gpu_memory=None)
    assert rb.gpu.name == "H200" and abs(rb.gpu.total_bytes - 79.25 * GiB) <= 1
    assert any("check --gpu" in n for n in rb.notes), rb.notes
    # the H200 family's one name is said
    assert any("every card of the H200 family" in n for n in rb.notes), rb.notes
    # before 0.12.0 the name is the H200's own (fused_moe.py 0.11.0 writes no family name)
    v011 = "INFO 10-02 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0\n"
    notes: list[str] = []
    assert card_named_by_moe_lookup(parse_log(v011 + _found("NVIDIA_H200") + FIGURES), notes)
    assert not any("H200 family" in n for n in notes), notes
    # nvidia-smi lines naming another card: they are taken, and the lookup's card is said
    smi = "GPU 0: NVIDIA L40S (UUID: GPU-1)\n"
    rb = rebuild(parse_log(smi + _found("NVIDIA_A100-SXM4-80GB") + FIGURES), model="qwen3-8b",
                 gpu=None, gpu_memory=None)
    assert rb.gpu.name == "L40S"
    assert any("fused-MoE config lookup names the A100-80GB" in n for n in rb.notes), rb.notes


def test_names_that_are_not_one_card_are_left_with_a_note() -> None:
    # a card the catalog lacks (an Intel Arc name of vLLM's configs, with its parentheses), a
    # name that is no one card's ("NVIDIA_H100", of a config file vLLM ships), two cards
    for lines in (_found("NVIDIA_L20Y"), _found("Intel(R)_Arc(TM)_Pro_B60_Graphics"),
                  _found("NVIDIA_H100"), _found("NVIDIA_L40S") + _found("NVIDIA_H200")):
        notes: list[str] = []
        assert card_named_by_moe_lookup(parse_log(lines + FIGURES), notes) is None
        assert "pass --gpu" in notes[0]
        code, _out, err = _explain(lines + FIGURES)  # no total either: explain asks for the card
        assert code == 2 and err.startswith("error: the log does not show the GPU's total"), err
        rb = rebuild(parse_log(lines + FIGURES + TOTAL), model="qwen3-8b", gpu=None,
                     gpu_memory=None)
        assert rb.gpu.name == "A100-PCIe-80GB"  # the total's card, as without the lines


_PIECES = st.sampled_from([
    "NVIDIA", "_", " ", "H100", "80GB", "HBM3", "-SXM4-", "A100", "H200", "AMD_Instinct_MI300X",
    ",", ".json", ".", "'", "[", "]", "/", "9" * 300, "é", "\x00", "\t", "device_name=",
    "dtype=fp8_w8a8", "..."])
_NAME = st.lists(_PIECES, min_size=0, max_size=10).map("".join)


@settings(max_examples=int(os.environ.get("MEMPROF_FUZZ_EXAMPLES", "600")) // 8, deadline=None,
          derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_NAME, min_size=1, max_size=3), st.booleans())
def test_fuzz_device_names(names: list[str], with_total: bool) -> None:
    """Garbage in the device_name: explain fits, or refuses with an error and a hint (exit 2)
    only where the card is not shown otherwise; it never crashes, and no name read is longer
    than the reader's bound."""
    lines = [_found(n) for n in names]
    lines += [f"{GEMM[form].replace(H100, n)}\n" for n, form in zip(names, GEMM, strict=False)]
    lines += [f"{SG_MOE[form].replace(H100, n)}\n" for n, form in zip(names, SG_MOE,
                                                                      strict=False)]
    text = "".join(lines) + FIGURES + (TOTAL if with_total else "")
    assert all(len(n) <= 80 for n in moe_lookup_devices(text.splitlines()))
    assert all(len(n) <= 80 for n in gemm_lookup_devices(text.splitlines()))
    code, _out, err = _explain(text)
    assert code in (0, 1, 2), err
    if code == 2:
        first, _, rest = err.partition("\n")
        assert first.startswith("error: ") and rest.startswith("hint: "), err
    if with_total:
        assert code in (0, 1), err
