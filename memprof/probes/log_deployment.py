"""A start-up log → the deployment that printed it: the model, the GPU (the card nvidia-smi lines
pasted with it or vLLM's fused-MoE config lookup name, else the total the log shows matched to
the catalog; a named card or ``--gpu``'s at the total the log shows), the settings the
log states, and the measured figures to set beside memprof's estimate."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from memprof.base.errors import BadInput
from memprof.base.units import GiB, MiB
from memprof.core.auto_fit import AUTO_FIT
from memprof.core.deployment import Deployment
from memprof.core.engines import ENGINES
from memprof.core.engines.vllm_runner import V2_SAMPLER_WARMUP_PASS
from memprof.core.gpus import (
    GPU,
    GPU_MATCH,
    PRINTED_ROUNDING,
    catalog,
    gpu_from_total,
    resolve_gpu,
)
from memprof.core.versions import resolve_version, split_generation, value_at
from memprof.probes.log_dates import release_dates
from memprof.probes.moe_config_device import H200_FAMILY, MOE_CONFIG_H200_FAMILY, in_h200_family
from memprof.probes.startup_log import StartupLog

# figures that are settings or context, not quantities memprof estimates
CONTEXT_KEYS = frozenset({"gpu_memory_utilization", "mem_fraction_static", "concurrency_tokens",
                          "logged_max_model_len", "oom_tried_bytes", "initial_usage_bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Rebuilt:
    model: str
    deployment: Deployment
    gpu: GPU
    measured: dict[str, float]
    given: set[str]
    engine_fix: str | None = None
    notes: list[str] = field(default_factory=list)


def local_repo_name(path: str) -> str:
    """The repo name a local model path ends in, as the hubs' download folders spell it: the
    Hugging Face cache's ``models--ORG--NAME`` (huggingface_hub's ``repo_folder_name``) and
    ModelScope's ``Qwen2___5-7B``, whose downloads write each '.' of a name as '___'."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if base.startswith("models--") and base.count("--") >= 2:
        base = base.split("--", 2)[2]
    return base.replace("___", ".")


def resolve_model(name: str) -> str:
    """A model named in a log: a bundled name or HF id, or a local path whose last part is the
    name of a bundled model's HF repo (``/path/to/Qwen3-235B-A22B-FP8``)."""
    from memprof.core.models import bundled_models
    from memprof.core.models.load import hf_ids

    key = name.strip().lower()
    if key in bundled_models() or key in hf_ids():
        return name
    base = local_repo_name(key)
    for hf, (_written, bundled) in hf_ids().items():
        if hf.rsplit("/", 1)[-1] == base:
            return bundled
    if base in bundled_models():
        return base
    from memprof.core.models.load import suggest_models

    close = suggest_models(name) or suggest_models(base)
    raise BadInput(f"the log's model {name[:80]!r} is not a bundled model",
                   hint=(f"if it is {close[0]}, pass --model {close[0]}" if len(close) == 1
                         else f"if it is one of {', '.join(close)}, pass it with --model"
                         if close else "pass --model") + " (memprof models lists the bundled "
                   "ones), or give its config.json")


def logged_total(log: StartupLog) -> float | None:
    """The GPU total the log prints (vLLM's ``total_gpu_memory``, its "Free memory on device
    (free/total GiB)", torch's OOM "GPU 0 has a total capacity of X GiB"): what
    ``torch.cuda.mem_get_info`` gave the engine on that machine; ``None`` where it prints none."""
    return log.get("total_gpu_bytes") or log.get("oom_total_bytes") or None


def log_gpu(log: StartupLog) -> GPU | None:
    """The card the log's printed total stands for (``memprof.core.gpus.gpu_from_total``);
    ``None`` where the log prints no total."""
    total = logged_total(log)
    if not total:
        return None
    return gpu_from_total(total)


def shows_card(log: StartupLog) -> bool:
    """The log's printed total is a catalog card's (to the 0.01 GiB it is printed to), so the
    log shows which card ran it; a total that is no catalog card's (the nearest one is taken,
    an assumption) or no total at all does not."""
    total = logged_total(log)
    if not total:
        return False
    return any(abs(g.total_bytes - total) <= PRINTED_ROUNDING for g in catalog())


def _card_from_log(log: StartupLog, notes: list[str]) -> GPU:
    """The card of a log run without ``--gpu``: the one its printed total stands for."""
    found = log_gpu(log)
    total = logged_total(log)
    if found is None or not total:
        raise BadInput("the log does not show the GPU's total memory",
                       hint="pass --gpu (memprof gpus lists the catalog), or --gpu-memory "
                       "with --gpu-arch for a card it lacks")
    if shows_card(log):
        notes.append(f"GPU: {found.name}, {found.total_bytes / GiB:.2f} GiB as the log shows it")
    else:
        notes.append(f"GPU: {found.name} assumed, {total / GiB:.2f} GiB as the log shows it: "
                     f"that total is no catalog card's, and the {found.name} (architecture "
                     f"{found.arch}) is the nearest (pass --gpu to name the card)")
    return found


def whole_card_total(log: StartupLog, g: GPU) -> int | None:
    """The card's whole memory (``configs/gpus.json`` ``smi_total_mib``, nvidia-smi's total) in
    bytes where the total the log prints is that, to the places it is printed to (vLLM 0.29's
    "Free memory on device (14.8/15.9 GiB)" to 0.1 GiB, 0.27's "(22.45/23.99 GiB)" to 0.01):
    torch's ``mem_get_info`` reports the whole card under Windows and WSL2 (the catalog's RTX
    4060 and RTX 5060 Ti notes), less on a Linux driver; else None. The printed figure rounds
    the exact total away, and this is the one exact total it can stand for on the named card."""
    fig = log.figures.get("total_gpu_bytes") or log.figures.get("oom_total_bytes")
    if fig is None or g.smi_total_mib is None:
        return None
    whole = g.smi_total_mib * MiB
    return whole if abs(whole - fig.value) <= max(fig.half_unit, PRINTED_ROUNDING) else None


def card_named_in_log(log: StartupLog, notes: list[str]) -> GPU | None:
    """The catalog card the nvidia-smi lines pasted with the log name (``memprof.probes.
    gpu_names``), where they name one card: every name resolves (``memprof.core.gpus.find_gpu``)
    to the same catalog row and any nvidia-smi total printed beside a name is that row's
    (``smi_total_mib``, within 1%). Else None, with a note where the log names cards at all
    (several kinds, a name the catalog lacks, a total of another card): the card is then taken
    as without them."""
    if not log.cards:
        return None
    from memprof.core.gpus import find_gpu

    rows: dict[str, GPU] = {}
    why = ""
    for name, mib in log.cards:
        try:
            g = find_gpu(name)
        except BadInput:
            why = f"{name[:60]!r} is no catalog card's name"
            break
        if mib is not None and g.smi_total_mib and abs(mib - g.smi_total_mib) > 0.01 * mib:
            why = (f"its {name[:60]!r} prints {mib:,} MiB, not the {g.name}'s "
                   f"{g.smi_total_mib:,} MiB")
            break
        rows[g.name] = g
    if not why and len(rows) > 1:
        why = "they are " + " and ".join(sorted(rows)) + " (one card is rebuilt)"
    if why:
        notes.append(f"the log's nvidia-smi lines name GPUs, but {why}: the card is taken as "
                     "if they were not there (pass --gpu to name it)")
        return None
    (g,) = rows.values()
    notes.append(f"GPU: {g.name}, as the log's nvidia-smi lines name it "
                 f"({log.cards[0][0][:60]!r})")
    return g


def card_named_by_moe_lookup(log: StartupLog, notes: list[str]) -> GPU | None:
    """The catalog card the log's Triton kernel-config lookup lines name (``memprof.probes.
    moe_config_device``: the ``device_name=`` of the tuning file vLLM's or SGLang's fused-MoE
    layer or W8A8 block-FP8 GEMM looks for, the driver's name with underscores for spaces),
    where they name one card: every name resolves (``memprof.core.gpus.find_gpu``, by the name
    the driver reports) to the same catalog row. Else None, with a note where the log has such
    lines at all (a name the catalog lacks, several cards): the card is then taken as without
    them. ``NVIDIA_H200``, which vLLM 0.12.0+'s fused-MoE lookup writes for every card of the
    H200 family, is taken as the H200, and the note says so (but for a log that names an
    earlier release or is SGLang's, where it is the H200's own name); where a GEMM lookup of
    the same log names a card of that family, that name (never collapsed) is taken."""
    names, what, family_only = _lookup_reading(log)
    if not names:
        return None
    from memprof.core.gpus import find_gpu
    from memprof.probes.moe_config_device import driver_spelling

    rows: dict[str, GPU] = {}
    why = ""
    for device in names:
        try:
            g = find_gpu(driver_spelling(device))
        except BadInput:
            why = f"'device_name={device[:60]}' is no catalog card's name"
            break
        rows[g.name] = g
    if not why and len(rows) > 1:
        why = "they name " + " and ".join(sorted(rows)) + " (one card is rebuilt)"
    if why:
        notes.append(f"the log's {what} names the device, but {why}: the card "
                     "is taken as if it did not (pass --gpu to name it)")
        return None
    (g,) = rows.values()
    family = ("; vLLM 0.12.0+ writes NVIDIA_H200 for every card of the H200 family, so an "
              "H200 NVL logs it too (pass --gpu H200-NVL if it was one)"
              if family_only else "")
    notes.append(f"GPU: {g.name}, as the log's {what} names it "
                 f"('device_name={names[0][:60]}', the driver's name with underscores "
                 f"for spaces){family}")
    return g


def _lookup_reading(log: StartupLog) -> tuple[tuple[str, ...], str, bool]:
    """The device names the log's kernel-config lookups give, each once (the fused-MoE
    lookup's, then the GEMM's), what gives the first (for the notes), and whether that is
    vLLM 0.12.0+'s H200 family name alone. The family name beside a GEMM line naming a card of
    that family (the driver's name, never collapsed) is left out: that card is the one."""
    collapsed = _family_name_logged(log)
    pinned = collapsed and any(in_h200_family(n) for n in log.gemm_devices)
    moe = tuple(n for n in log.moe_devices if not (pinned and n == H200_FAMILY))
    names = tuple(dict.fromkeys((*moe, *log.gemm_devices)))
    what = ("fused-MoE config lookup" if names and names[0] in moe
            else "W8A8 block-FP8 kernel config lookup")
    return names, what, collapsed and not pinned


def _family_name_logged(log: StartupLog) -> bool:
    """The log's fused-MoE lookup names ``NVIDIA_H200`` where it stands for the H200 family:
    vLLM 0.12.0+ (``fused_moe.py`` ``get_config_file_name``; SGLang and vLLM's GEMM lookup write
    the driver's name)."""
    if H200_FAMILY not in log.moe_devices:
        return False
    from memprof.core.versions import rule_in_force

    engine = log.engine or MOE_CONFIG_H200_FAMILY[0].engine  # a log naming no engine: vLLM's
    try:
        return rule_in_force(MOE_CONFIG_H200_FAMILY, log.version, engine) is not None
    except ValueError:  # a version memprof cannot place: the newest release's naming
        return rule_in_force(MOE_CONFIG_H200_FAMILY, None, engine) is not None


def _lookup_disagrees(log: StartupLog, named: GPU, notes: list[str]) -> None:
    """A note where the fused-MoE config lookup names another card than the nvidia-smi lines
    pasted with the log (which are taken): the two are said, not reconciled."""
    looked = card_named_by_moe_lookup(log, [])
    if looked is not None and looked.name != named.name:
        names, what, _ = _lookup_reading(log)
        notes.append(f"the log's {what} names the {looked.name} "
                     f"('device_name={names[0][:60]}'), not the {named.name} its "
                     "nvidia-smi lines name: the nvidia-smi lines are taken (pass --gpu to "
                     "name the card)")


def _named_card_at_logged_total(log: StartupLog, g: GPU, notes: list[str],
                                by: str = "--gpu") -> GPU:
    """The named card (``--gpu``'s, or the one the log's nvidia-smi lines name: ``by``) at the
    total the log prints, where that is not the catalog's: the engine sized its budget on the
    total it saw (driver and ECC reserves differ between machines), so the card is rebuilt on
    it, with a note; the card's whole memory where the print is that (``whole_card_total``); a
    total far from the card's (beyond ``memprof.core.gpus.GPU_MATCH``) is taken too, and the
    note asks to check."""
    total = logged_total(log)
    if not total and log.wsl and g.smi_total_mib is not None and not g.is_rocm \
            and g.total_bytes != g.smi_total_mib * MiB:
        notes.append(f"GPU: {g.name} ({by}) at its whole {g.smi_total_mib:,} MiB (nvidia-smi's "
                     "total): the log prints no total and says vLLM runs under WSL ('as WSL is "
                     "detected'), where torch reports the whole card, not the catalog's "
                     f"{g.total_bytes / GiB:.2f} GiB")
        return replace(g, total_bytes=g.smi_total_mib * MiB, exact=False,
                       source="the card's nvidia-smi total (WSL)")
    if not total or abs(g.total_bytes - total) <= PRINTED_ROUNDING:
        return g
    whole = whole_card_total(log, g)
    if whole is not None:
        notes.append(f"GPU: {g.name} ({by}) at its whole {g.smi_total_mib:,} MiB (nvidia-smi's "
                     f"total), which the log's {total / GiB:g} GiB is to the places it prints: "
                     "torch reports the whole card there (as under Windows and WSL2), not the "
                     f"catalog's {g.total_bytes / GiB:.2f} GiB")
        return replace(g, total_bytes=whole, exact=False,
                       source="the card's nvidia-smi total, which the log's total prints as")
    off = abs(g.total_bytes - total) / total
    check = ("" if off <= GPU_MATCH else
             f"; that is {off:.2%} off the card's, check --gpu (or give --gpu-memory)")
    notes.append(f"GPU: {g.name} ({by}) at the {total / GiB:.2f} GiB total the log prints, "
                 f"not the catalog's {g.total_bytes / GiB:.2f} GiB: the engine budgeted on the "
                 f"total it saw{check}")
    return replace(g, total_bytes=int(total), exact=False,
                   source="the log's total (rounded to 0.01 GiB)")


def newest_v0_release() -> str:
    """The newest vLLM release memprof models whose default engine is V0 (before 0.8.0)."""
    from memprof.core.kvcache import V0_BLOCK_SIZE
    from memprof.core.releases import VLLM_RELEASES
    from memprof.core.versions import rule_in_force

    return [r for r in VLLM_RELEASES if rule_in_force(V0_BLOCK_SIZE, r) is not None][-1]


def patch_base(release: str, among: list[str]) -> str | None:
    """The release of ``among`` that ``release`` is a patch re-release of (``0.10.1.1`` and
    ``0.8.5.post1`` re-ship 0.10.1 and 0.8.5 with a fix), or None."""
    import re

    return next((r for r in among if re.fullmatch(re.escape(r) + r"(?:\.[0-9]+|\.post[0-9]+)",
                                                   release)), None)


def _architecture(model: str, hf_overrides: object) -> str | None:
    """The architecture vLLM resolves for ``model`` (its config's first ``architectures``, or
    the logged ``--hf-overrides``' where they give one), or None where memprof cannot read it
    here (a model it does not know: the rebuild says so itself)."""
    from memprof.core.models.config import with_overrides
    from memprof.core.models.load import load_config

    try:
        cfg = load_config(model)[1]
        if isinstance(hf_overrides, str) and hf_overrides:
            cfg = with_overrides(cfg, hf_overrides)
    except BadInput:
        return None
    archs = cfg.get("architectures")
    return str(archs[0]) if isinstance(archs, list) and archs else None


def _lacks(engine: str, release: str, architecture: str | None) -> bool:
    """Does ``release``'s model registry (the engine's ``check_architecture``:
    ``memprof.core.engines.vllm_registry`` for vLLM, ``sglang_registry`` for SGLang) leave out
    ``architecture``?"""
    runs = ENGINES.get(engine)
    if runs is None or not architecture:
        return False
    try:
        runs.check_architecture(release, architecture, architecture)
    except BadInput:
        return True
    return False


def _placed_release(log: StartupLog, engine: str, notes: list[str],
                    architecture: str | None = None) -> str | None:
    """The release a log that names none was printed by, from its ``[file.py:LINE]`` tags and
    the message formats only some releases print that it shows (``memprof.probes.
    release_lines``): the newest of the releases whose logging calls sit where the tags say and
    that print each such format, with a note naming them; where no release's calls hold every
    tag but one pair of consecutive releases brackets them (``release_lines.between``), the
    older of the two (if it prints the formats); ``None`` where they place it nowhere. A patch
    re-release (``0.10.1.1``, ``0.8.5.post1``) whose lines its base release shares is not told
    from it by tags: the base is taken, and the note names both. Where the log's date places it
    among the releases the tags fit (``memprof.probes.log_dates.among``: the newest of them
    published by that date, or the first where it precedes them all), that one is taken."""
    from memprof.probes.log_dates import among
    from memprof.probes.release_lines import between, consistent, printing

    by_tags = consistent(engine, log.tags)
    by_format = printing(engine, log.formats)
    if by_tags is None and by_format is None:
        return None
    evidence = []
    if log.tags:
        evidence.append("its tags (" + ", ".join(f"{f}:{n}" for f, n, *_ in log.tags[:4]) + ")")
    if by_format is not None:
        evidence.append("its " + " and ".join(repr(f) for f in log.formats) + " line")
    shown = " and ".join(evidence)
    if by_tags is None:
        found = list(by_format or [])
    else:
        found = [r for r in by_tags if by_format is None or r in by_format]
    if not found:
        pair = between(engine, log.tags) if log.tags else None
        if pair is not None and (by_format is None or pair[0] in by_format):
            if (_lacks(engine, pair[0], architecture)
                    and not _lacks(engine, pair[1], architecture)):
                # the build ran the model, which the older release cannot load: it is the
                # newer one's code (vllm_registry: the registry of each release read)
                notes.append(f"the log names no release, and {shown} match no release's "
                             f"logging lines but lie between {pair[0]}'s and {pair[1]}'s: a "
                             f"build between them, rebuilt at {pair[1]}, as {pair[0]}'s model "
                             f"registry has no {architecture} and {pair[1]}'s has "
                             "(--engine-version to choose another)")
                return pair[1]
            # setuptools-scm names a build after vA "A'.devN", which memprof.core.release_names
            # models at A (the commits since may have changed what memprof models)
            notes.append(f"the log names no release, and {shown} match no release's "
                         f"logging lines but lie between {pair[0]}'s and {pair[1]}'s: a build "
                         f"between them, rebuilt at {pair[0]} (as a development build on the way "
                         f"to {pair[1]} is; --engine-version to choose another)")
            return pair[0]
        notes.append(f"the log names no release, and {shown} match{'' if log.tags else 'es'} "
                     "no release "
                     "memprof has the logging lines of (a build between releases, or a fork)")
        return None
    which = found[0] if len(found) == 1 else f"{', '.join(found[:-1])} and {found[-1]}"
    verb = "are" if by_format is None else "fit"
    loadable = [r for r in found if not _lacks(engine, r, architecture)]
    if loadable and len(loadable) < len(found):
        # the log ran the model: a release whose registry lacks its architecture did not
        shown += (f" ({', '.join(r for r in found if r not in loadable)} left out: no "
                  f"{architecture} in their model registry)")
        found = loadable
    dated = among(engine, found, log.date) if log.date is not None else None
    if dated is not None:  # the log's date chooses among them (memprof.probes.log_dates)
        notes.append(f"the log names no release; {shown} {verb} the logging lines of {which}; "
                     f"{dated.note}: rebuilt at {dated.release}")
        return dated.release
    pick, why = found[-1], " (the newest of them)" if len(found) > 1 else ""
    while (base := patch_base(pick, found)) is not None:
        pick, why = base, (f" (the newest of them but for its patch re-release {found[-1]}, "
                           "which the log cannot tell from it)")
    notes.append(f"the log names no release; {shown} {verb} the logging lines of "
                 f"{which}: rebuilt at {pick}{why}")
    return pick


def _dated_release(log: StartupLog, engine: str, notes: list[str]) -> str | None:
    """A log that names no release and that its lines do not place: the newest release
    published on or before its date where the log shows a year (``memprof.probes.log_dates.
    published_by``), with a note; with a month-day alone, None and a note that the release is
    unknown (the caller's default stands)."""
    from memprof.probes.log_dates import published_by

    assert log.date is not None
    dated = published_by(engine, log.date)
    if dated is not None:
        notes.append(f"the log names no release: {dated.note}, so it is rebuilt at that "
                     "release (--engine-version to choose another)")
        return dated.release
    return None


def _unknown_release_note(log: StartupLog, engine: str) -> str:
    """The note of a log whose release nothing in it shows (no name, no tag, no date with a
    year): explain estimates at the engine's newest modelled release."""
    from memprof.core.releases import DISPLAY_NAMES, RELEASES

    when = log.date
    why = ("shows no date" if when is None else
           f"its lines are dated {when.day_text} with no year (line {when.line}), which nothing "
           "in it fixes" if when.year is None else
           f"its date {when.day_text} precedes every release memprof knows the date of")
    return (f"the log names no {DISPLAY_NAMES.get(engine, engine)} release and {why}: the "
            f"release is unknown; estimated at {RELEASES[engine][-1]}, the newest modelled "
            "(--engine-version to choose another)")


def _logged_release(log: StartupLog, engine: str, notes: list[str],
                    name: str | None = None) -> str | None:
    """The release the log names, as memprof models it (``memprof.core.release_names``: dev,
    release-candidate and vendor builds mapped to the nearest modelled release, with a note);
    a V0 log of a release whose default engine is V1 is rebuilt with V0's rules
    (``"0.8.5+v0"``: versions.split_generation). ``None`` (and a note) when the name is no
    version memprof can read. A development build the log's date shows was built after its
    release was published is modelled at that release (``memprof.probes.log_dates.dev_build``)."""
    from memprof.core.release_names import map_release
    from memprof.core.versions import V0_SUFFIX
    from memprof.probes.log_dates import dev_build

    name = name or log.version
    assert name is not None
    mapped = map_release(name, engine)
    if mapped is None:
        notes.append(f"the log names release {name[:40]!r}, which memprof cannot read as "
                     "a version: rebuilt at the newest modelled release (--engine-version to "
                     "choose one)")
        return None
    release = mapped.release
    dated = dev_build(engine, name, log.date) if log.date is not None else None
    if dated is not None and dated.release != release:  # memprof.probes.log_dates.dev_build
        release = (map_release(dated.release, engine) or mapped).release
        notes.append(f"the log names the development build {name[:40]!r}; {dated.note}")
    elif mapped.note:
        notes.append(mapped.note)
    wrote = ENGINES.get(engine)
    if (wrote is not None and wrote.has_v0_generation and log.generation == "V0"
            and split_generation(release)[1] == "v1"):
        try:  # the engine refuses V0 where the release has none
            as_v0 = wrote.rules_release(Deployment(engine=engine, vllm_use_v1=0), None, release)
        except BadInput:
            as_v0 = release
        if as_v0.endswith(V0_SUFFIX):
            notes.append(f"the log shows V0 lines at {release} (VLLM_USE_V1=0 or V1's "
                         "fallback): rebuilt with V0's rules")
            release = as_v0
        else:
            notes.append(f"the log looks like V0 but {release} has no V0 engine: rebuilt "
                         "with its V1 rules")
    if name == log.version:
        notes.append(f"rebuilt at the release the log names ({release})")
    return release


def _logged_v1(dep: Deployment, generation: str | None, notes: list[str]) -> Deployment:
    """``dep`` with ``VLLM_USE_V1=1`` where the log shows the V1 engine and vLLM would fall back
    to V0 for this deployment when the variable is unset (``engines/vllm.py`` ``V1_FALLBACK``:
    0.8.0-0.8.2 ran ``--enable-lora`` on V0 unless ``VLLM_USE_V1=1`` was set): the log is
    evidence of the variable, which its lines do not print."""
    from memprof.core.versions import V0_SUFFIX

    runs = ENGINES.get(dep.engine)
    if (runs is None or not runs.has_v0_generation or generation != "V1"
            or dep.vllm_use_v1 is not None or not dep.engine_version):
        return dep
    try:
        falls_back = runs.rules_release(dep, None, dep.engine_version).endswith(V0_SUFFIX)
        # only a check vLLM warns on under VLLM_USE_V1=1 (LoRA): one it refuses there stays
        runs.rules_release(dep.with_(vllm_use_v1=1), None, dep.engine_version)
    except BadInput:
        return dep
    if not falls_back:
        return dep
    notes.append(f"the log shows V1 lines where vLLM {dep.engine_version} falls back to V0 "
                 "for these settings unless VLLM_USE_V1=1 is set: rebuilt with VLLM_USE_V1=1")
    return dep.with_(vllm_use_v1=1)


def _logged_positions(model: str, positions: int, notes: list[str],
                      logged: str | None = None) -> str | None:
    """``--hf-overrides`` for the checkpoint's ``max_position_embeddings`` where the log prints
    its config (transformers' ``Model config … {`` dump: ``memprof.probes.checkpoint_config``)
    and the bundled config of ``model`` has another (a fine-tune that raises it): vLLM sizes
    the RoPE cache by it and takes ``max_model_len`` from it where none is set. ``logged``: the
    ``hf_overrides`` the deployment already carries (the log's non-default args, or the user's),
    merged with it as vLLM sees the two: the dump prints the checkpoint's config before
    ``get_config`` updates it with ``hf_overrides`` (vllm/transformers_utils/config.py, 0.11.0 -
    0.33.0), so a key ``logged`` gives wins. None where nothing changes: they agree, ``logged``
    sets the key itself, or memprof does not know ``model`` (the estimate says so itself)."""
    import json

    from memprof.core.models.config import parse_overrides
    from memprof.core.models.load import load_model

    try:
        bundled = load_model(model).max_position_embeddings
        given = parse_overrides(logged) if logged else {}
    except BadInput:
        return None
    if bundled == positions or "max_position_embeddings" in given:
        return None
    override = json.dumps({"max_position_embeddings": positions, **given})
    notes.append(f"the log prints the checkpoint's config (transformers' 'Model config' dump) "
                 f"with max_position_embeddings {positions:,}, where the bundled {model} has "
                 f"{'none' if bundled is None else f'{bundled:,}'}: rebuilt with --hf-overrides "
                 f"'{override}' (the RoPE cache and the default max_model_len follow it)")
    return override


# the LoRA settings beside --enable-lora, as Deployment fields
_LORA_SIZES = ("max_loras", "max_lora_rank", "lora_extra_vocab_size", "lora_dtype",
               "fully_sharded_loras", "enable_lora_bias", "specialize_active_lora")


def _logged_lora(dep: Deployment, model: str, notes: list[str],
                 given: frozenset[str] = frozenset()) -> Deployment:
    """``dep`` as the log turns LoRA on, or without LoRA (and a note saying why) where memprof
    refuses the log's LoRA settings for this model: a log is evidence, so the rest of it is
    still explained. A LoRA setting the user gave (``given``: fields of ``_LORA_SIZES``) that
    vLLM refuses is the user's mistake, not the log's: it is refused, never dropped with LoRA."""
    from memprof.core.lora import lora_settings
    from memprof.core.models.load import load_model

    def check(d: Deployment) -> None:
        spec = load_model(model)
        lora_settings(spec.family, d.engine_version, max_loras=d.max_loras,
                      max_lora_rank=d.max_lora_rank,
                      lora_extra_vocab_size=d.lora_extra_vocab_size,
                      lora_dtype=d.lora_dtype, fully_sharded_loras=d.fully_sharded_loras,
                      model_dtype=spec.dtype, tp=d.tp, enable_lora_bias=d.enable_lora_bias,
                      specialize_active_lora=d.specialize_active_lora)

    try:
        check(dep)
    except BadInput as exc:
        mine = given & set(_LORA_SIZES)
        if mine:
            unset = Deployment()
            try:  # the same check without the user's LoRA settings
                check(dep.with_(**{k: getattr(unset, k) for k in mine}))
            except BadInput:
                pass  # the log's LoRA itself is refused: left out below, as without them
            else:
                raise
        notes.append(f"the log turns LoRA on, which memprof leaves out here: {exc.message}")
        return dep.with_(enable_lora=False, max_loras=None, max_lora_rank=None,
                         lora_extra_vocab_size=None, lora_dtype="auto",
                         fully_sharded_loras=False, enable_lora_bias=False,
                         specialize_active_lora=False)
    return dep


def _logged_flashinfer_sampler(dep: Deployment, notes: list[str]) -> Deployment:
    """``dep`` sampling with FlashInfer as the log shows it ("Using FlashInfer for top-p & top-k
    sampling.", or ``VLLM_USE_FLASHINFER_SAMPLER=1`` on its command), or without it (and a note
    saying why) where memprof refuses that sampler at the log's release or engine
    (``memprof.core.terms.activation.check_flashinfer_sampler``: modelled at vLLM 0.8.0-0.11.0
    V1 only): a log is evidence, so the rest of it is still explained, with the sampler
    memprof models there and the note saying so; ``--vllm-use-flashinfer-sampler`` given by
    the user is not dropped."""
    from memprof.core.terms.activation import check_flashinfer_sampler

    try:
        check_flashinfer_sampler(dep)
    except BadInput as exc:
        release = split_generation(dep.engine_version or "")[0]
        if value_at(V2_SAMPLER_WARMUP_PASS, release, default=False):
            notes.append(f"the log samples with FlashInfer: at {release} memprof's default "
                         "takes FlashInfer's sampler in Model Runner V2's warm-up pass where "
                         "the card supports it (memprof/core/engines/vllm_runner.py "
                         "v2_flashinfer_samples), the torch sampler on the V1 runner")
            return dep.with_(vllm_use_flashinfer_sampler=None)
        notes.append(f"the log samples with FlashInfer, which memprof leaves out here "
                     f"({exc.message}): estimated with the sampler memprof models at "
                     f"{dep.engine_version or 'the newest release'}, whose warm-up may differ")
        return dep.with_(vllm_use_flashinfer_sampler=None)
    return dep


def _logged_language_model_only(dep: Deployment, model: str, notes: list[str]) -> Deployment:
    """``dep`` as vLLM runs ``--language-model-only``: vllm/config/multimodal.py (0.17.0,
    0.27.1) MultiModalConfig.language_model_only is "equivalent to setting
    --limit-mm-per-prompt to 0 for every modality" (get_limit_per_prompt returns 0), so it is
    ``--limit-mm-per-prompt`` with each of the model's modalities at 0; a text-only model is
    left as it is. A release before the flag's (0.17.0) is refused, as its argparse would."""
    from memprof.core.models.multimodal import check_language_model_only
    from memprof.probes.serve_command import language_model_only_limits

    check_language_model_only(resolve_version(dep.engine_version, dep.engine))
    limits = language_model_only_limits(model)
    if limits is None:
        return dep
    notes.append(f"the log runs --language-model-only: read as --limit-mm-per-prompt '{limits}' "
                 "(vLLM's MultiModalConfig sets every modality's limit to 0), so no vision "
                 "tower is built")
    return dep.with_(limit_mm_per_prompt=limits)


def _unstated_settings_note(settings: dict[str, Any]) -> str:
    """What a log that shows no settings line leaves to memprof's defaults: the parallel
    sizes first (a rank's figures are the same lines at TP1 and TP8)."""
    sizes = [f"{name} 1" for name, field in (("TP", "tp"), ("PP", "pp"), ("DP", "dp"))
             if field not in settings]
    shown = f" ({', '.join(sizes)}, ...)" if sizes else ""
    return ("the log shows no settings (no serve command, argument list, engine config or "
            f"ServerArgs line): every setting it does not print is memprof's default{shown}; "
            "pass the deployment's flags (--tp, --max-model-len, ...) where they differ")


def rebuild(log: StartupLog, *, model: str | None, gpu: str | None, gpu_memory: str | None,
            gpu_arch: str | None = None,
            overrides: dict[str, Any] | None = None) -> Rebuilt:
    """The deployment of ``log``; ``overrides`` (Deployment fields the user gave) win over the
    log's own settings."""
    from memprof.base.units import parse_size

    notes: list[str] = []
    name = model or log.model
    if name is None:
        raise BadInput("the log does not name its model",
                       hint="pass --model (memprof models lists the bundled ones)")
    name = name if model else resolve_model(name)
    if gpu and gpu.strip().lower() == "auto":
        from memprof.probes.devices import local_gpu

        if gpu_arch is not None:  # as estimate's --gpu auto: bad input before the host is asked
            raise BadInput("--gpu-arch with --gpu auto: the host's GPU names its own "
                           "architecture", hint="leave out --gpu-arch")
        g = local_gpu()
        if gpu_memory:
            g = replace(g, total_bytes=parse_size(gpu_memory), exact=True, source="--gpu-memory")
    elif gpu or gpu_memory:
        g = resolve_gpu(gpu, parse_size(gpu_memory) if gpu_memory else None, gpu_arch)
        if not gpu_memory:
            g = _named_card_at_logged_total(log, g, notes)
    elif (named := card_named_in_log(log, notes)) is not None:
        _lookup_disagrees(log, named, notes)
        g = _named_card_at_logged_total(log, named, notes, by="the log's nvidia-smi lines")
    elif (looked := card_named_by_moe_lookup(log, notes)) is not None:
        g = _named_card_at_logged_total(log, looked, notes,
                                        by=f"the log's {_lookup_reading(log)[1]}")
    else:
        g = _card_from_log(log, notes)
    settings: dict[str, Any] = {**log.settings, **(overrides or {})}
    if (overrides or {}).get("num_speculative_tokens") == 0 and "speculative_method" not in (
            overrides or {}):
        # --num-speculative-tokens 0 turns the log's speculation off, its method with it
        settings.pop("speculative_method", None)
    wrote = ENGINES.get(log.engine or "")  # None: the log does not say which engine wrote it
    given = (overrides or {}).get("engine")
    if wrote is not None and given is not None and given != wrote.name:
        from memprof.core.releases import DISPLAY_NAMES

        # the log's figures are that engine's budget lines: another engine's rules cannot
        # rebuild them
        raise BadInput(f"--engine {given} but the log was written by "
                       f"{DISPLAY_NAMES.get(wrote.name, wrote.name)}",
                       hint="drop --engine: the log names its engine")
    util = log.get("gpu_memory_utilization")
    if util and (wrote is None or wrote.budget_by_utilization):
        settings.setdefault("gpu_memory_utilization", util)
    mfs = log.get("mem_fraction_static")
    if mfs and wrote is not None and not wrote.budget_by_utilization:  # mem_fraction_static
        settings.setdefault("mem_fraction_static", mfs)
    if log.get("auto_fit_max_model_len") and "max_model_len" not in settings:
        # the engine ran --max-model-len auto: its concurrency line prints the fitted length
        settings["max_model_len"] = AUTO_FIT
    for key in ("logged_max_model_len", "concurrency_tokens"):
        v = log.get(key)
        if v and "max_model_len" not in settings:
            settings["max_model_len"] = int(v)
    engine = str(settings.pop("engine", None) or (
        log.engine if wrote is not None else Deployment().engine))
    runs = ENGINES.get(engine)
    if not settings.get("engine_version") and log.version and runs is not None:
        settings["engine_version"] = _logged_release(log, engine, notes)
    if not settings.get("engine_version") and not log.version and runs is not None:
        placed = _placed_release(log, engine, notes,
                                 _architecture(name, settings.get("hf_overrides")))
        if placed is None and log.date is not None:
            placed = _dated_release(log, engine, notes)
        if placed is not None:
            settings["engine_version"] = _logged_release(log, engine, notes, placed)
    if (runs is not None and runs.has_v0_generation and log.generation == "V0"
            and not settings.get("engine_version")):
        settings["engine_version"] = newest_v0_release()
        notes.append(f"the log is vLLM V0 and names no release: estimated at "
                     f"{settings['engine_version']}, the newest release memprof models where V0 "
                     "is the default engine (--engine-version to choose another)")
    if (runs is not None and not settings.get("engine_version") and not log.version
            and release_dates(engine) is not None):  # engines placed by date say so
        notes.append(_unknown_release_note(log, engine))
    if log.config_positions is not None:
        given = settings.get("hf_overrides")
        override = _logged_positions(name, log.config_positions, notes,
                                     given if isinstance(given, str) else None)
        if override is not None:
            settings["hf_overrides"] = override
    if not log.stated:
        notes.append(_unstated_settings_note(settings))
    try:
        dep = Deployment(engine=engine).with_(**settings)
    except TypeError as exc:  # pragma: no cover - settings keys are Deployment fields
        raise BadInput(f"the log's settings: {exc}", hint="report this log") from None
    dep = _logged_v1(dep, log.generation, notes)
    if dep.enable_lora and "enable_lora" not in (overrides or {}):
        dep = _logged_lora(dep, name, notes, frozenset(overrides or {}))
    if (dep.vllm_use_flashinfer_sampler == 1
            and "vllm_use_flashinfer_sampler" not in (overrides or {})):
        dep = _logged_flashinfer_sampler(dep, notes)
    if log.language_model_only and "limit_mm_per_prompt" not in (overrides or {}):
        # it wins over the log's own --limit-mm-per-prompt, as in vLLM (a flag the user gives
        # wins over both)
        dep = _logged_language_model_only(dep, name, notes)
    measured = {k: f.value for k, f in log.figures.items() if k not in CONTEXT_KEYS}
    fix = None
    est_len = log.get("estimated_max_model_len")
    if est_len:
        fix = f"--max-model-len {int(est_len)} (the engine's estimate of the longest that fits)"
    elif log.get("kv_tokens") and log.get("logged_max_model_len"):
        fix = (f"--max-model-len {int(log.get('kv_tokens') or 0)} (the KV cache's capacity the "
               "log shows)")
    return Rebuilt(model=name, deployment=dep, gpu=g, measured=measured, given=set(settings),
                   engine_fix=fix, notes=notes)
