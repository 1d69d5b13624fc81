"""The GPU a vLLM log names in its fused-MoE config lookup: the ``device_name=`` of the tuned
config file the MoE layer looks for.

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

Only these lines are read (a ``device_name=`` elsewhere is not), and only the name's
characters up to the ``,`` or ``.json`` that ends it; the names are resolved against the
catalog by ``memprof.probes.log_deployment.card_named_by_moe_lookup``.
"""

from __future__ import annotations

import re

MAX_NAME = 80  # characters of a device name (the driver's longest are ~50)

# vLLM's two fused-MoE lookup messages (fused_moe.py get_moe_configs), either order of the path
_LOOKUP = re.compile(r"Using configuration from .*? for MoE layer\.|Using default MoE config\. "
                     r"Performance might be sub-optimal! Config file not found at ")
# the file name's device part: up to the ',' of the next selector or the '.json' of the name
_DEVICE = re.compile(r"device_name=([^,\s'\"\[\]]{1," + str(MAX_NAME) + r"}?)(?=,|\.json)")

# the name vLLM 0.12.0+ writes for every card of the H200 family (fused_moe.py
# get_config_file_name)
H200_FAMILY = "NVIDIA_H200"


def moe_lookup_devices(lines: list[str]) -> tuple[str, ...]:
    """The ``device_name`` of each fused-MoE config lookup line, as logged (underscores for
    the driver's spaces), each name once, in order of first appearance."""
    found: list[str] = []
    for line in lines:
        if "device_name=" not in line or not _LOOKUP.search(line):
            continue
        for m in _DEVICE.finditer(line):
            if m.group(1) not in found:
                found.append(m.group(1))
    return tuple(found)


def driver_spelling(device_name: str) -> str:
    """The driver's name a logged ``device_name`` stands for: underscores back to spaces (the
    catalog's names and aliases compare letters and digits alone, ``memprof.core.gpus.
    find_gpu``, so a driver name's own ``_`` or ``/`` read as a space changes nothing)."""
    return device_name.replace("_", " ").strip()
