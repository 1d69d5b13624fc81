"""transformers' ``Model config Qwen3Config {`` dump in a start-up log is the checkpoint's own
config: explain reads its top-level ``max_position_embeddings`` (``memprof.probes.
checkpoint_config``) and, where the bundled config the user names has another, rebuilds with
``--hf-overrides`` for it, with a note (``memprof.probes.log_deployment._logged_positions``).
The lines are published row 1602's source log (Freshair129/Private-Runtime-Platform
xinference-vllm-startup.log at d66cbe8), which prints the dump twice, plain and under the engine
process's prefix."""

from __future__ import annotations

import json

from memprof.core.models.load import load_model
from memprof.probes.checkpoint_config import logged_positions
from memprof.probes.log_deployment import rebuild
from memprof.probes.startup_log import parse_log

HEADER = ("2026-09-24T22:07:00.036Z INFO transformers.configuration_utils pid:82 role:local "
          "address:0.0.0.0:20897 node:71d39f53861d Model config Qwen3Config {")
DUMP = [HEADER, '  "architectures": [', '    "Qwen3ForCausalLM"', "  ],",
        '  "head_dim": 128,', '  "max_position_embeddings": 262144,',
        '  "max_window_layers": 36,', '  "rope_parameters": {', '    "rope_theta": 5000000,',
        '    "rope_type": "default"', "  },", '  "vocab_size": 151936', "}", ""]
# the engine process prints it again, each line under its prefix
PREFIXED = ["(EngineCore pid=186) [transformers] Model config Qwen3Config {",
            '(EngineCore pid=186)   "max_position_embeddings": 262144,', "(EngineCore pid=186) }"]
FIGURES = ["(EngineCore pid=186) INFO 09-24 22:08:14 [model_runner.py:428] Model loading took "
           "7.64 GiB memory and 63.756755 seconds",
           "(EngineCore pid=186) INFO 09-24 22:09:28 [gpu_worker.py:640] Available KV cache "
           "memory: 2.71 GiB"]


def test_the_dump_plain_prefixed_or_elided_gives_the_checkpoints_value() -> None:
    assert logged_positions(DUMP) == 262144
    assert logged_positions(PREFIXED) == 262144
    assert logged_positions([HEADER, "...", '  "max_position_embeddings": 262144,', "..."]) \
        == 262144
    assert logged_positions(DUMP + PREFIXED) == 262144  # the same checkpoint twice


def test_a_nested_key_a_line_outside_a_dump_or_two_values_give_none() -> None:
    nested = [HEADER, '  "vision_config": {', '    "max_position_embeddings": 1024,', "  },",
              "}"]
    assert logged_positions(nested) is None
    assert logged_positions(['  "max_position_embeddings": 262144,']) is None  # no dump
    after = [*DUMP, '  "max_position_embeddings": 4096,']  # after the dump closed
    assert logged_positions(after) == 262144
    other = [HEADER, '  "max_position_embeddings": 40960,', "}"]
    assert logged_positions(DUMP + other) is None  # two checkpoints: neither is taken


def test_explain_rebuilds_with_the_checkpoints_positions() -> None:
    log = parse_log("\n".join([*DUMP, *FIGURES]))
    assert log.config_positions == 262144
    rb = rebuild(log, model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert load_model("qwen3-4b").max_position_embeddings == 40960
    assert json.loads(rb.deployment.hf_overrides or "{}") == {"max_position_embeddings": 262144}
    assert any("max_position_embeddings 262,144" in n and "40,960" in n for n in rb.notes)


def test_no_override_where_the_bundled_config_agrees_or_the_user_gives_one() -> None:
    same = [HEADER, '  "max_position_embeddings": 40960,', "}", *FIGURES]
    rb = rebuild(parse_log("\n".join(same)), model="qwen3-4b", gpu="H100", gpu_memory=None)
    assert rb.deployment.hf_overrides is None
    assert not any("Model config" in n for n in rb.notes)
    mine = '{"max_position_embeddings": 65536}'
    rb = rebuild(parse_log("\n".join([*DUMP, *FIGURES])), model="qwen3-4b", gpu="H100",
                 gpu_memory=None, overrides={"hf_overrides": mine})
    assert rb.deployment.hf_overrides == mine
