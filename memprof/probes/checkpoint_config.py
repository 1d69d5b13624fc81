"""The checkpoint's own ``config.json`` where a start-up log prints it: transformers logs the
config it loads at INFO, ``Model config Qwen3Config {`` then the JSON (``PretrainedConfig.
__repr__``: ``to_json_string``, two spaces a level, keys sorted) and ``}`` on a line of its own
(transformers ``configuration_utils.py`` ``logger.info(f"Model config {config}")``). A server
that keeps transformers' INFO logging on prints it: Xinference's vLLM worker (published row
1602's container log prints it twice, plain and under the engine process's ``(EngineCore
pid=186)`` prefix).

One field is read, ``max_position_embeddings`` at the config's top level: vLLM sizes the RoPE
cos/sin cache by it (``layers/rotary_embedding`` ``get_rope(max_position=...)``) and takes
``max_model_len`` from it where none is set (``config/model.py`` ``_get_and_verify_max_len``),
so a fine-tune that raises it (262,144 against Qwen3-4B's 40,960) moves the load and the
budget; a bundled config stands in for the checkpoint elsewhere. A key nested deeper (a
``vision_config``'s, an ``audio_config``'s) is not the model's."""

from __future__ import annotations

import re

# transformers' "Model config Qwen3Config {" (after the logger's own prefix)
_OPENS = re.compile(r"\bModel config \w+ \{\s*$")
# a process prefix vLLM's multiprocessing puts before each line ("(EngineCore pid=186) ")
_PREFIX = re.compile(r"^\((?:\w|-)+ pid=\d+\) ")
# the key at the dump's top level: two spaces in (json.dumps(indent=2))
_TOP_POSITIONS = re.compile(r'  "max_position_embeddings": ([0-9]{1,9}),?\s*')
_CLOSES = re.compile(r"\}\s*")
# a line a quote puts for lines it leaves out
_ELIDED = re.compile(r"\s*(?:\.\.\.|…)\s*")


def logged_positions(lines: list[str]) -> int | None:
    """``max_position_embeddings`` of the config transformers' ``Model config … {`` dump in
    ``lines`` prints at its top level (lines a quote elides with ``...`` between them are
    skipped); None where no dump prints it, or where two dumps print two values (two
    checkpoints)."""
    found: set[int] = set()
    inside = False
    for line in lines:
        body = _PREFIX.sub("", line, count=1)
        if _OPENS.search(line):
            inside = True
            continue
        if not inside or _ELIDED.fullmatch(body):
            continue
        if _CLOSES.fullmatch(body):
            inside = False
            continue
        m = _TOP_POSITIONS.fullmatch(body)
        if m:
            found.add(int(m.group(1)))
    return found.pop() if len(found) == 1 else None
