"""What an SGLang start-up log says about its deployment and release, beyond the figures
``probes/startup_log.py`` reads from it.

- ``server_args=ServerArgs(…)``, the dataclass's repr (through 0.5.18, ``entrypoints/engine.py``
  ``logger.info(f"{server_args=}")``), or from 0.5.19 ``server_args={'model_path': …, 'tp_size':
  2, …}``, the dict of ``ServerArgs.resolved_dict()`` (0.5.19 ``entrypoints/engine.py``
  ``logger.info(f"server_args={server_args.resolved_dict()}")``; 0.5.23 logs the same dict with
  its secrets redacted, ``_server_args_for_logging``). Both are printed after the release's
  heuristics and resolution ran, so their values are the ones the server used
  (``mem_fraction_static``, ``chunked_prefill_size`` and ``cuda_graph_max_bs`` after the
  release's heuristics); the dict's nested dicts (``cuda_graph_config``) are values, not
  fields. A field is read when it names a setting of SGLang's flags (``engines/sglang.py``
  ``SGLang.flags``: ``tp_size``, ``context_length``, ...); ``enable_ep_moe`` / ``ep_size`` > 1
  is expert parallelism over the TP ranks.
- the scheduler's ``max_total_num_tokens=…, context_len=…`` line (the context length; its
  ``max_running_requests`` is derived from the pool, not a setting) and ``Capture cuda graph bs
  […]`` (the batch sizes captured; the largest is the graph batch) fill what ServerArgs left
  ``None``.
- an attention backend's page-size override, ``TensorRT-LLM MHA only supports page_size of 16,
  32 or 64, changing page_size from None to 64.`` (SGLang 0.5.x ``python/sglang/srt/
  server_args.py`` ``_handle_attention_backend_compatibility``: trtllm_mha, trtllm_mla, the XPU
  backend; FlashMLA's ``change page_size to 64``): the page size the pool is built with, where
  the log shows no ServerArgs ``page_size`` (printed after the override, so it wins).
- the attention backend SGLang chose where the command gave none ("Attention backend not
  specified. Use fa3 backend by default.", "Using triton as attention backend for …":
  ``attention_backend_line``), where ServerArgs prints ``attention_backend=None`` (0.4.x
  resolves the default in the model runner, after ServerArgs is printed) or no ServerArgs line
  is shown; so the rebuilt deployment runs the logged backend, not memprof's default pick.
- the release: the one the log names (``sglang==0.4.6.post1``, an ``lmsysorg/sglang:v0.4.6``
  image), mapped onto a modelled release as ``--engine-version`` maps it
  (``memprof.core.release_names.map_release``: a post release memprof does not model on its
  own, such as 0.4.9.post2, at the newest release published before its wheel was built: 0.4.9;
  a development build at the release before it); a log that
  names none is placed by its ServerArgs field names, which differ from release to release
  (``configs/sglang_server_args.json``, read from each wheel's ``ServerArgs``), else by its
  first timestamp (``memprof.probes.log_dates``: SGLang stamps each line ``[YYYY-MM-DD
  HH:MM:SS …]``, the host's local time), at the newest release, not a source snapshot,
  published (PyPI's first upload) 14 hours or more before it, so in every time zone
  (``log_dates.published_by``); with none of these, the newest modelled release. A release
  newer than the newest numbered one memprof reads (0.5.23), such as a main build after it, is
  estimated at that one. The note says which and why.

"Load weight end. … mem usage=X GB" is ``before_avail_memory − after_avail_memory`` (SGLang
0.4.4 – 0.5.23 ``model_runner.py`` ``load_model``): the drop in free memory while loading, so it
holds every allocation made during load (weights, buffers built with the model, the allocator's
rounding) and, at TP1 in the releases that run no kernel before it
(``SGLANG_FIRST_KERNEL_BEFORE_LOAD``), the process's first kernel's non-torch memory, not the
weight bytes alone (``load_drop`` and ``SGLANG_LOAD_FIGURE`` in
``memprof/core/engines/sglang.py``); 0.4.3
prints only the two ``avail mem`` figures. SGLang's "GB" is bytes / 2**30
(``get_available_gpu_memory``).
"""

from __future__ import annotations

import ast
import json
import re
from functools import lru_cache
from typing import Any

from memprof.core.engines import ENGINES
from memprof.core.engines.sglang_attention import SGLANG_BACKENDS
from memprof.core.flags import BY_FIELD
from memprof.core.release_names import map_release
from memprof.core.releases import PUBLISHED, SGLANG_RELEASES
from memprof.core.versions import newest, version_key
from memprof.probes.log_dates import LogDate, published_by, read_date

ENGINE = "sglang"
# settings memprof keeps for itself (not read from a log)
_NOT_FROM_LOG = frozenset({"engine", "engine_version", "scratch", "assume_architecture"})
# a ServerArgs line with fewer fields than this is a fragment: too few to place a release
MIN_FIELDS_TO_PLACE = 40
# the nearest release's field set must share this much (Jaccard) with the line's
MIN_SIMILARITY = 0.8

_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)")
_SERVER_ARGS_DICT = re.compile(r"server_args=\{(.*)")  # 0.5.19 and later (module docstring)
_SCHEDULER = re.compile(r"max_total_num_tokens=\s*[0-9]+,(.*)")
_CAPTURE_BS = re.compile(r"Capture cuda graph bs \[([0-9,\s]+)\]")
# server_args.py's warnings when an attention backend overrides the page size (module docstring)
_PAGE_SIZE_SET = re.compile(r"only supports (?:a )?page_size of [^,]*(?:,[^,]*)*?,? "
                            r"chang(?:e|ing) page_size (?:from \S+ )?to ([0-9]+)\b")
# the lines that name the attention backend SGLang chose where no --attention-backend was given
# (their sources in ``attention_backend_line``)
_BACKEND_LINES = (
    re.compile(r"Attention backend not (?:set|(?:explicitly )?specified)\. Use ([a-z0-9_]+) "
               r"backend by default\."),
    re.compile(r"MLA optimization is turned on\. Use ([a-z0-9_]+) backend\."),
    re.compile(r"\bUsing ([a-z0-9_]+) as attention backend for \w+"),
    re.compile(r"\bUse ([a-z0-9_]+) as attention backend on \w+ for \w+"),
    re.compile(r"\bUse ([a-z0-9_]+) attention backend for DeepSeek with DSA\."),
)
# the rank prefix of a scheduler process's lines, ``[2026-04-10 23:19:05 TP3] ...``: SGLang's
# run_scheduler_process (managers/scheduler.py) builds it from " DP{dp_rank}", " PP{pp_rank}",
# " TP{tp_rank}", " EP{moe_ep_rank}" (each where that size is above 1; older releases print
# " TP0" at TP 1 too, as published row 167's log of the 0.4.3 era does) and configure_logger
# puts it after the timestamp ("[%(asctime)s{prefix}]"); the stamp is read in any of the
# forms asctime takes: configure_logger's datefmt "%Y-%m-%d %H:%M:%S", or the time alone (an
# SGLANG_LOGGING_CONFIG_PATH config's datefmt, or a quote that trims the date, as published rows
# 1453 and 1454 do: "[01:40:16 TP1] Load weight end. ...")
_RANK_PREFIX = re.compile(r"^\[(?:20[0-9]{2}-[01][0-9]-[0-3][0-9] )?[0-2][0-9]:[0-5][0-9]"
                          r":[0-5][0-9](?:[.,][0-9]{1,6})?((?: [A-Z_]+[0-9]{1,4})+)\]")
_NAMED = (re.compile(r"\bsglang(?:\s+version)?\s*(?:==|:|=)?\s*v?([0-9]+\.[0-9]+\.[0-9]+[\w.]*)",
                     re.I),
          re.compile(r"lmsysorg/sglang:v?([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)", re.I))


def _snake(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


@lru_cache(maxsize=1)
def server_arg_fields() -> dict[str, str]:
    """ServerArgs field → Deployment field: the snake_case of each of SGLang's flags for a
    setting (``--tp-size`` → ``tp_size``, ``--context-length`` → ``context_length``)."""
    flags = ENGINES[ENGINE].flags
    return {_snake(f): fld for fld, names in flags.items() if fld not in _NOT_FROM_LOG
            for f in names}


def split_fields(body: str) -> dict[str, str]:
    """``a=1, b='x, y', c=[1, 2], d=Cfg(e=3))`` → ``{"a": "1", "b": "'x, y'", "c": "[1, 2]",
    "d": "Cfg(e=3)"}``: the top-level ``name=value`` pairs of a dataclass repr, up to the
    parenthesis that closes it. A quote that elides fields (``a=1, ... d=4``) keeps the pair
    after the ellipsis."""
    out: dict[str, str] = {}
    parts = _top_level(body, keep_cut=True)
    for part in parts:
        name, eq, value = re.sub(r"^(?:\.\.\.|…)\s*", "", part.strip()).partition("=")
        if eq and re.fullmatch(r"[A-Za-z_]\w*", name):
            out[name] = value.strip()
    return out


def split_dict_fields(body: str) -> dict[str, str]:
    """``'a': 1, 'b': 'x, y', 'c': {'tp_size': 9}}`` → ``{"a": "1", "b": "'x, y'",
    "c": "{'tp_size': 9}"}``: the top-level ``'name': value`` pairs of a dict's repr (what
    follows ``server_args={``), up to the brace that closes it; a nested dict's keys are not
    fields. A line cut short keeps the pairs it holds whole."""
    out: dict[str, str] = {}
    for part in _top_level(body):
        m = re.fullmatch(r"\s*'([A-Za-z_]\w*)'\s*:\s*(.*?)\s*", part, re.S)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _top_level(body: str, *, keep_cut: bool = False) -> list[str]:
    """The comma-separated items of ``body`` at bracket depth 0, up to the bracket that closes
    the enclosing one. In a body cut short the last item is kept where ``keep_cut`` (a
    ``name=value`` pair cut inside its value still names its field), else dropped (it may be
    cut too)."""
    depth, quote, start = 0, "", 0
    parts: list[str] = []
    for i, ch in enumerate(body):
        if quote:
            if ch == quote and body[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                parts.append(body[start:i])
                return parts
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    if keep_cut:
        parts.append(body[start:])
    return parts


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text.removeprefix("torch.") if text.startswith("torch.") else text


def _setting(fld: str, value: object) -> object | None:
    """``value`` as the settings table reads field ``fld`` (None: not a value of that kind)."""
    kind = BY_FIELD[fld].kind
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if kind in ("int", "tokens"):
        return value if (isinstance(value, int) and 0 < value < 1 << 40) or (
            fld == "chunked_prefill_size" and value in (-1, 0)) else None
    if kind == "float":
        return float(value) if isinstance(value, int | float) and 0 < value < 1 else None
    if kind == "str" and isinstance(value, str):
        return value.removeprefix("torch.")
    return None


def server_args_settings(fields: dict[str, str]) -> dict[str, Any]:
    """The Deployment settings a ServerArgs line's fields state."""
    names = server_arg_fields()
    out: dict[str, Any] = {}
    for key, text in fields.items():
        fld = names.get(key)
        if fld is None or fld not in BY_FIELD:
            continue
        value = _setting(fld, _literal(text))
        if value is not None:
            out.setdefault(fld, value)
    # from 0.5.18 the decode graphs' batch is cuda_graph_config's decode phase (0.5.19
    # arg_groups/cuda_graph_hook.py parse_cuda_graph_config, which --cuda-graph-max-bs, a
    # deprecated alias of --cuda-graph-max-bs-decode in server_args.py, and memory_hook.py's
    # sizing set); the 0.5.19+ dict prints it as a dict ({'decode': {'max_bs': 4, ...}, ...})
    graphs = _literal(fields.get("cuda_graph_config", "None"))
    decode = graphs.get("decode") if isinstance(graphs, dict) else None
    if isinstance(decode, dict) and decode.get("backend") != "disabled":
        max_bs = _setting("cuda_graph_max_bs", decode.get("max_bs"))
        if max_bs is not None:
            out.setdefault("cuda_graph_max_bs", max_bs)
    ep = _literal(fields.get("ep_size", "1"))
    if _literal(fields.get("enable_ep_moe", "False")) is True or (
            isinstance(ep, int) and not isinstance(ep, bool) and ep > 1):
        out["enable_expert_parallel"] = True
    return out


@lru_cache(maxsize=1)
def release_fields() -> dict[str, frozenset[str]]:
    """Each numbered release's ServerArgs field names (``configs/sglang_server_args.json``)."""
    out: dict[str, frozenset[str]] = {}
    have: set[str] = set()
    for row in _table()["releases"]:
        have = (have | set(row["added"])) - set(row["removed"])
        out[row["release"]] = frozenset(have)
    return out


def place_by_fields(names: set[str]) -> tuple[str, str] | None:
    """(release, why) for a ServerArgs line of these field names: the numbered release whose
    field set is nearest (Jaccard), the newest numbered one also when the line has fields that
    no numbered release has (a newer build); None for a fragment or no close match."""
    if len(names) < MIN_FIELDS_TO_PLACE:
        return None
    sets = release_fields()
    best = max(sets, key=lambda r: (len(names & sets[r]) / len(names | sets[r]),
                                    version_key(r)))
    sim = len(names & sets[best]) / len(names | sets[best])
    if sim < MIN_SIMILARITY:
        return None
    last = list(sets)[-1]
    newer = names - sets[last]
    if best == last and len(newer) > 3:
        return last, (f"its ServerArgs has {len(newer)} fields SGLang {last} does not "
                      f"({', '.join(sorted(newer)[:3])}, ...): a newer build, estimated at "
                      f"{last}, the newest release memprof reads")
    return best, (f"its ServerArgs fields match SGLang {best}'s "
                  f"({len(names & sets[best])} of {len(names)} shared)")


def _post_release_by_date(placed: tuple[str, str], when: LogDate) -> tuple[str, str]:
    """``placed`` (a release its ServerArgs fields match) or, where the log's date chooses, a
    post release of it that memprof models (0.4.8.post1, 0.4.9.post5): ``configs/
    sglang_server_args.json`` keeps the fields by numbered release, so a post release's line
    matches its base's, and the date chooses among the two as it chooses among the vLLM
    releases whose logging lines a log's tags fit (``memprof.probes.log_dates.among``: the
    newest of them published before the log's stamp in any time zone)."""
    from memprof.probes.log_dates import among

    family = [r for r in SGLANG_RELEASES
              if r == placed[0] or r.startswith(placed[0] + ".post")]
    dated = among(ENGINE, family, when) if len(family) > 1 else None
    if dated is None or dated.release == placed[0]:
        return placed
    return dated.release, (f"{placed[1]}, the fields of its post release {dated.release} too; "
                           f"{dated.note}")


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    from memprof.core.models import configs_dir

    data: dict[str, Any] = json.loads(
        (configs_dir() / "sglang_server_args.json").read_text(encoding="utf-8"))
    return data


def place_by_date(when: LogDate | str) -> tuple[str, str]:
    """(release, why) for a log first stamped ``when`` (its ``LogDate``, or ``YYYY-MM-DD`` for
    the start of that day): the newest SGLang release (not a source snapshot) published before
    it in any time zone (``memprof.probes.log_dates.published_by``: PyPI's first upload, 14
    hours' margin for the host's zone); a stamp before every release, the oldest modelled."""
    if isinstance(when, str):
        year, month, day = (int(x) for x in when.split("-"))
        when = LogDate(month, day, year, when, 1)
    placed = published_by(ENGINE, when)
    if placed is not None:
        return placed.release, placed.note
    first = SGLANG_RELEASES[0]
    published = PUBLISHED[ENGINE][0][1][:10]
    return first, (f"its first line is dated {when.day_text} (line {when.line}: "
                   f"{when.text!r}), before SGLang {first} was published ({published}, PyPI's "
                   "upload), the oldest modelled")


def modelled_release(named: str) -> tuple[str, str]:
    """The modelled release a release name maps onto, and the note saying so (empty when the
    name is a modelled release): ``memprof.core.release_names.map_release``, the mapping
    ``--engine-version`` takes too, where a log may also name a release newer than the newest
    memprof reads (estimated there, with the note)."""
    mapped = map_release(named, ENGINE)
    if mapped is None:
        return newest(ENGINE), (f"the log's SGLang {named!r} is not a release number: "
                                f"estimated at {newest(ENGINE)}, the newest modelled")
    return mapped.release, mapped.note or ""


def named_release(text: str) -> str | None:
    """The SGLang release a log's text names (a pip pin, ``sglang: X``, an image tag)."""
    for rx in _NAMED:
        m = rx.search(text)
        if m:
            return m.group(1).rstrip(".")
    return None


def attention_backend_line(line: str) -> str | None:
    """The attention backend a line of SGLang's names as the one it chose, where it is one of
    SGLang's ``--attention-backend`` names (``sglang_attention.SGLANG_BACKENDS``); None
    elsewhere. The lines (``logger.info`` / ``logger.warning``, printed when no backend was
    given):

    - "Attention backend not set. Use X backend by default." (0.4.x
      ``model_executor/model_runner.py`` ``model_specific_adjustment``);
    - "Attention backend not explicitly specified. Use X backend by default." (0.5.5
      ``server_args.py`` ``_handle_attention_backend``), "Attention backend not specified. Use
      X backend by default." (0.5.10 ``server_args.py``, 0.5.19
      ``arg_groups/overrides.py``);
    - "MLA optimization is turned on. Use X backend." (0.4.x ``model_runner.py``);
    - "Using X as attention backend for ARCH." (0.5.5 / 0.5.10 ``server_args.py``, 0.5.19
      ``arg_groups/model_hook.py``), "Use X as attention backend on sm100 for ARCH" and "on
      PLATFORM for Llama4 model" (0.5.10 ``server_args.py``), "Use nsa attention backend for
      DeepSeek with DSA." (0.5.10 ``server_args.py``)."""
    for rx in _BACKEND_LINES:
        m = rx.search(line)
        if m and m.group(1) in SGLANG_BACKENDS:
            return m.group(1)
    return None


def _tp_from_ranks(lines: list[str], settings: dict[str, Any]) -> list[str]:
    """Set ``tp`` from the scheduler processes' rank prefixes where no command or ServerArgs
    gave it: a log whose prefixes name TP ranks alone (``TP0`` … ``TP3``, no DP, PP or EP rank,
    whose layouts the ranks do not pin) runs at least that many TP ranks; the lowest TP that
    shows them (the highest rank + 1) is taken, and the returned note says so. Nothing where
    the highest rank is 0 (one rank: the TP size is not shown)."""
    top = -1
    for line in lines:
        m = _RANK_PREFIX.match(line)
        if m is None:
            continue
        for token in m.group(1).split():
            name = token.rstrip("0123456789")
            if name != "TP":
                return []  # a DP / PP / EP rank too: the layout is not TP alone
            top = max(top, int(token[len(name):]))
    if top < 1:
        return []
    settings["tp"] = top + 1
    return [f"the log shows no TP size, but its scheduler lines name TP ranks up to TP{top} "
            f"(SGLang's per-rank log prefix): TP {top + 1} assumed, the fewest ranks that "
            "print them (pass -tp to say otherwise)"]


def read_sglang(lines: list[str], engine: str, settings: dict[str, Any]
                ) -> tuple[dict[str, Any], list[str]]:
    """``settings`` (read from the log's command) completed from an SGLang log's ServerArgs,
    scheduler and capture lines, with ``engine_version`` set to the release the log was
    estimated at; and the notes saying what was assumed. A log of another ``engine``: the
    settings as they are, no note."""
    if engine != ENGINE:
        return settings, []
    out = dict(settings)
    notes: list[str] = []
    fields: dict[str, str] = {}
    later: dict[str, Any] = {}
    page: int | None = None
    for line in lines:
        m = _SERVER_ARGS.search(line)
        if m and not fields:
            fields = split_fields(m.group(1))
        m = _SERVER_ARGS_DICT.search(line)
        if m and not fields:
            fields = split_dict_fields(m.group(1))
        m = _SCHEDULER.search(line)
        if m:
            sched = {k: _literal(v) for k, v in split_fields(m.group(1)).items()}
            ctx = _setting("max_model_len", sched.get("context_len"))
            if ctx is not None:
                later.setdefault("max_model_len", ctx)
        m = _CAPTURE_BS.search(line)
        if m:
            sizes = [int(x) for x in m.group(1).replace(",", " ").split()]
            if sizes:
                later.setdefault("cuda_graph_max_bs", max(sizes))
        m = _PAGE_SIZE_SET.search(line)
        if m:
            page = int(m.group(1))  # the last override is the one the server kept
        backend = attention_backend_line(line)
        if backend is not None:  # the last line names the one the server kept
            later["attention_backend"] = backend
    if page is not None:  # over the command's --page-size, which the backend replaced
        out["block_size"] = page
    out.update(server_args_settings(fields))  # the values the server ran with
    for k, v in later.items():
        out.setdefault(k, v)
    if "tp" not in out:
        notes += _tp_from_ranks(lines, out)
    if "engine_version" not in out:
        name = named_release("\n".join(lines))
        if name:
            release, note = modelled_release(name)
        else:
            placed = place_by_fields(set(fields))
            when = read_date(lines)  # the first stamp (memprof.probes.log_dates)
            if when is not None and when.year is not None:
                built = {r["release"]: r["built"] for r in _table()["releases"]}
                if placed is None:
                    placed = place_by_date(when)
                elif built.get(placed[0], "") > when.day_text:
                    # the fields of a later release, the date before it: a post release
                    earlier, why = place_by_date(when)
                    placed = earlier, (f"{placed[1]}, but {why}: a build between the two")
                else:
                    placed = _post_release_by_date(placed, when)
            if placed is not None:
                release, why = placed
                note = (f"the log names no SGLang release; estimated at {release}: {why} "
                        "(--engine-version to choose another)")
            else:
                release = newest(ENGINE)
                note = (f"the log names no SGLang release and shows no full ServerArgs line: "
                        f"estimated at {release}, the newest modelled (--engine-version to "
                        "choose another)")
        out["engine_version"] = release
        if note:
            notes.append(note)
    return out, notes
