"""The GPU a vLLM or SGLang log names in its Triton kernel-config lookups: the ``device_name=``
of the tuned config file the fused-MoE layer or the W8A8 block-FP8 GEMM looks for.

vLLM picks the Triton fused-MoE kernel's tuning file by the card's name
(``model_executor/layers/fused_moe/fused_moe.py`` ``get_config_file_name``:
``E={E},N={N},device_name={device_name}...json``) and logs the path it used or missed
(``get_moe_configs`` / ``try_get_optimal_moe_config``), in these forms:

- ``Using configuration from <path> for MoE layer.`` (every release read: 0.6.3, 0.10.0,
  0.12.0, 0.20.2, 0.30.0);
- ``Using default MoE config. Performance might be sub-optimal! Config file not found at
  <path>``: one path up to 0.10.0, the Python list of the paths tried (``VLLM_TUNED_CONFIG_FOLDER``
  first) from 0.10.1 to 0.12.0 (``['/a/...json', '/b/...json']``), the paths joined by ``", "``
  in 0.20.2 and 0.30.0.

``device_name`` is the driver's name of the card (``current_platform.get_device_name()``:
``torch.cuda.get_device_name``, NVML's ``nvmlDeviceGetName``, "NVIDIA A100-SXM4-80GB") with its
spaces written as underscores (``.replace(" ", "_")`` in 0.6.3-0.20.2; from 0.30.0
``vllm/utils/platform_utils.py`` ``get_device_name_as_file_name`` writes each run of
whitespace and ``/`` as one ``_``). From 0.12.0 a name with an ``H200`` word ("NVIDIA H200
NVL") is written ``NVIDIA_H200`` (``get_config_file_name``: "Set device_name to H200 if a
device from the H200 family is detected"), so that name stands for the whole H200 family
(:data:`H200_FAMILY`).

vLLM's W8A8 block-FP8 GEMM looks its tuning file up by the same name
(``model_executor/layers/quantization/utils/fp8_utils.py`` ``get_w8a8_block_fp8_configs``:
``N={N},K={K},device_name={device_name},dtype=fp8_w8a8,block_shape=[..].json``: in 0.12.0 the
platform's name with ``.replace(" ", "_")``, in later sources ``get_device_name_as_file_name``;
no H200 family name, so a GEMM line names the card of that family itself) and logs ``Using
configuration from <path> for W8A8 Block FP8 kernel.`` or ``Using default W8A8 Block FP8 kernel
config. Performance might be sub-optimal! Config file not found at <path>``.

SGLang names the file the same way (``srt/utils.py`` / ``srt/utils/common.py``
``get_device_name``: ``torch.cuda.get_device_name``, with ``.replace(" ", "_")`` at each lookup;
no family name in 0.4.3, 0.4.9, 0.5.3, 0.5.10 or 0.5.23) and logs, from its fused-MoE config lookup
(``srt/layers/moe/fused_moe_triton/fused_moe.py`` ``get_moe_configs`` in 0.4.3 and 0.4.9,
``fused_moe_triton_config.py`` in 0.5.3 and 0.5.10):

- ``Using configuration from <path> for MoE layer.`` (0.4.3, vLLM's wording);
- ``Using MoE kernel config from <path>.`` (0.4.9, 0.5.3, 0.5.10);
- ``Config file not found at <path>. Fallback to triton version <v> and use MoE kernel config
  from <path>. Performance might be sub-optimal!`` (0.4.9, 0.5.3, 0.5.10);
- ``Using default MoE config. Performance might be sub-optimal! Config file not found at
  <path>`` (0.4.3), ``Using default MoE kernel config. ...`` (0.4.9, 0.5.3, 0.5.10) and ``Using
  MoE kernel config with down_moe=False. ...`` (0.5.10), then ``Config file not found at <path>``
  (with ``, you can create them with <url>`` from 0.4.9);
- ``Down MoE config file not found at <path>; reusing the tuned up-projection config without
  TMA.`` (0.5.23, ``srt/layers/moe/moe_runner/triton_utils/fused_moe_triton_config.py``);

where a down projection's file name (0.5.10+, ``down_moe_selector``) ends ``_down.json``, which
is not part of the name; and from its block-quantized GEMMs (``srt/layers/quantization/
fp8_kernel.py`` and ``int8_kernel.py`` ``get_w8a8_block_{fp8,int8}_configs``, 0.4.3-0.5.10;
``kernels/ops/gemm/`` in 0.5.23) the W8A8 Block FP8 lines above (block shape written ``[128,
128]``), their ``W8A8 Block INT8`` twins, and 0.5.23's ``Using configuration from <path> for
W8A8 channelwise FP8 GEMM.``. SGLang 0.5.23 names the device as 0.4.3 did (no family name).

Only these lines are read (a ``device_name=`` elsewhere is not), and only the name's
characters up to the ``,`` or ``.json`` (``_down.json``) that ends it; the names are resolved
against the catalog by ``memprof.probes.log_deployment.card_named_by_moe_lookup``.
"""

from __future__ import annotations

import re

from memprof.core.versions import Rule

MAX_NAME = 80  # characters of a device name (the driver's longest are ~50)

# the fused-MoE lookup messages: vLLM's (fused_moe.py get_moe_configs) and SGLang's
# (fused_moe.py / fused_moe_triton_config.py get_moe_configs), either order of the path
_MOE_LOOKUP = re.compile(
    r"Using configuration from .*? for MoE layer\.|Using MoE kernel config from "
    r"|Using (?:default MoE(?: kernel)? config|MoE kernel config with down_moe=False)\. "
    r"Performance might be sub-optimal! Config file not found at "
    r"|Config file not found at .*?\. Fallback to triton version .*? and use MoE kernel config "
    r"from |Down MoE config file not found at ")
# the block-quantized GEMM lookup messages: vLLM's (fp8_utils.py get_w8a8_block_fp8_configs) and
# SGLang's (fp8_kernel.py / int8_kernel.py get_w8a8_block_{fp8,int8}_configs, and 0.5.23's
# channelwise FP8 GEMM lookup in kernels/ops/gemm/fp8_kernel.py)
_GEMM_LOOKUP = re.compile(
    r"Using configuration from .*? for W8A8 (?:Block (?:FP8|INT8) kernel|channelwise FP8 GEMM)\."
    r"|Using default W8A8 Block (?:FP8|INT8) kernel config\. Performance might be sub-optimal! "
    r"Config file not found at ")
# the file name's device part: up to the ',' of the next selector or the '.json' of the name,
# less the '_down' SGLang 0.5.10 writes before it for the down projection's config where no
# selector follows the name (fused_moe_triton_config.py get_config_file_name: down_moe_selector)
_DEVICE = re.compile(r"device_name=([^,\s'\"\[\]]{1," + str(MAX_NAME)
                     + r"}?)(?=,|(?:_down)?\.json)")

# the name vLLM 0.12.0+ writes for every card of the H200 family (fused_moe.py
# get_config_file_name)
H200_FAMILY = "NVIDIA_H200"

# vLLM's fused-MoE lookup names every H200-family card NVIDIA_H200 from 0.12.0 (0.12.0
# model_executor/layers/fused_moe/fused_moe.py get_config_file_name: 'if "H200" in
# device_name.split("_")'; 0.11.0 writes the driver's name); SGLang's lookups never collapse it
# (a vLLM row: it holds for no SGLang log)
MOE_CONFIG_H200_FAMILY: tuple[Rule, ...] = (
    Rule(name="moe_config_h200_family", changes="fused-MoE config file name: the H200 family "
         "as NVIDIA_H200", since="0.12.0", until=None,
         introduced_by="read in the 0.12.0 wheel (0.11.0 writes the driver's name)",
         source="0.12.0 model_executor/layers/fused_moe/fused_moe.py get_config_file_name"),
)

def moe_lookup_devices(lines: list[str]) -> tuple[str, ...]:
    """The ``device_name`` of each fused-MoE config lookup line (vLLM's or SGLang's), as logged
    (underscores for the driver's spaces), each name once, in order of first appearance."""
    return _devices(lines, _MOE_LOOKUP)


def gemm_lookup_devices(lines: list[str]) -> tuple[str, ...]:
    """The ``device_name`` of each W8A8 block-FP8 (or SGLang's block-INT8) GEMM config lookup
    line, as logged, each name once, in order of first appearance: the driver's name, never
    vLLM's H200 family name."""
    return _devices(lines, _GEMM_LOOKUP)


def _devices(lines: list[str], lookup: re.Pattern[str]) -> tuple[str, ...]:
    found: list[str] = []
    for line in lines:
        if "device_name=" not in line or not lookup.search(line):
            continue
        for m in _DEVICE.finditer(line):
            if m.group(1) not in found:
                found.append(m.group(1))
    return tuple(found)


def in_h200_family(device_name: str) -> bool:
    """A name vLLM 0.12.0+'s fused-MoE lookup writes as ``NVIDIA_H200`` (``get_config_file_name``:
    ``"H200" in device_name.split("_")``)."""
    return "H200" in device_name.split("_")


def driver_spelling(device_name: str) -> str:
    """The driver's name a logged ``device_name`` stands for: underscores back to spaces (the
    catalog's names and aliases compare letters and digits alone, ``memprof.core.gpus.
    find_gpu``, so a driver name's own ``_`` or ``/`` read as a space changes nothing)."""
    return device_name.replace("_", " ").strip()
