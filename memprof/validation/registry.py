"""The validation registry: what ``memprof validate`` can run, as rows.

Each validation is one :class:`ValidationRow`, declared beside its own code: in the module of
its result type (``<name>_result``: ``mla_tq_result``, ``dsv4_result``, ``dp_gather_result``,
each listing its rows in ``VALIDATIONS``, as a family declares its row in its own module), next
to the module that runs it (``mla_tq``, ``dsv4``, ``dp_gather``). A row holds its name (the
``kernel`` of its JSON), the ``--kernel`` value it answers to, its title, the attention kind its
model must have, its seed deployment (the defaults), the ``--attention-backend`` values it runs,
the flags only it takes, its run (``runner``) and its result type. Every result answers one
shape, :class:`Validation`: the verdicts, the path the kernels took and a :class:`Block` (title,
one table, lines) that ``memprof.report.validate`` renders without knowing which validation it
came from. ``memprof.commands.validate`` is flags → :func:`rows` → :meth:`ValidationRow.run` →
reporter and names no validation.

The rows and results are pure data: listing them (``--help``, a bad flag refused, a recorded run's
JSON rebuilt and rendered) imports no torch; a row's run imports its module, and with it torch
and the kernels, when it runs. A new validation is a result module with its ``VALIDATIONS``, a
run module, and one entry in ``MODULES`` (``docs/extending.md``, "A validation").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Protocol

from memprof.base.errors import BadInput, EnvironmentProblem
from memprof.base.units import fmt_bytes
from memprof.validation.checks import MAX_SHARED_RATIO, Parity

MODULES = ("memprof.validation.mla_tq_result", "memprof.validation.dsv4_result",
           "memprof.validation.dp_gather_result")
"""The modules that declare validation rows (``VALIDATIONS``), in the order ``--kernel all``
runs them."""

ALL = "all"
CONTEXT_CPU = 256  # --context on the CPU (the torch reference): seconds, not minutes


@dataclass(frozen=True, slots=True)
class Block:
    """One validation as a reporter lays it out: a bold title, a table whose first column is
    the scratch policy (left) and the others figures (right), then lines of text."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[str, ...]


class Validation(Protocol):
    """What every validation result answers (a frozen dataclass: its JSON is its fields plus
    the ``VERDICTS`` it derives, ``memprof.validation.results``)."""

    VERDICTS: ClassVar[tuple[str, ...]]  # derived verdicts of its JSON, in order

    @property
    def kernel(self) -> str: ...  # the row's name
    @property
    def model(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def speed_passed(self) -> bool | None: ...
    @property
    def parity_passed(self) -> bool: ...
    @property
    def memory_passed(self) -> bool: ...
    @property
    def graph_passed(self) -> bool | None: ...  # None: no graph-clean check (or not run)
    @property
    def passed(self) -> bool: ...
    @property
    def path(self) -> str: ...  # what ran: "Triton", "torch reference", ...

    def block(self) -> Block: ...


@dataclass(frozen=True, slots=True)
class Request:
    """``memprof validate``'s flags, as given (None: the row's default)."""

    model: str | None = None
    tp: int | None = None
    batch: int | None = None
    backend: str | None = None
    gpu: str | None = None
    context: int | None = None
    layers: int = 4
    steps: int = 10
    device: str = "cpu"
    seed: int = 0
    dp: int | None = None
    kv_cache_memory_bytes: int | None = None
    graph_steps: int | None = None


@dataclass(frozen=True, slots=True)
class ValidationRow:
    """One validation ``memprof validate`` runs."""

    name: str  # the ``kernel`` of its result and JSON
    flag: str  # the --kernel value it answers to
    title: str  # the heading of its report
    runner: str  # "module:function" of its run, (Request) -> result; imported when it runs
    result: type  # its result type (rebuilt from JSON by memprof.validation.results)
    models: tuple[str, ...]  # bundled models it runs on; the first is --model's default
    # the rest of the seed deployment: the defaults of -tp, --max-num-seqs, --gpu
    tp: int
    batch: int
    gpu: str
    what: str  # what it runs, as errors name it ("the {what}")
    attention: str | None = None  # the attention kind its model must have (None: any)
    attention_label: str = ""  # that kind as errors name it ("MLA")
    context_cuda: int | None = None  # --context default on CUDA (None: takes no context)
    backends: tuple[str, ...] = ()  # --attention-backend values it runs; the first is default
    own: tuple[str, ...] = ()  # Request fields that only this validation reads

    @property
    def model(self) -> str:
        """The seed deployment's model."""
        return self.models[0]

    def run(self, req: Request) -> Validation:
        """Run it (imports its run's module: torch, the kernels; without torch, exit 3)."""
        module, _, name = self.runner.partition(":")
        try:
            fn: Callable[[Request], Validation] = getattr(importlib.import_module(module), name)
        except ImportError as e:
            if e.name not in ("torch", "triton"):
                raise
            raise EnvironmentProblem("memprof validate needs torch",
                                     hint="pip install 'memprof-llm[trace]'") from None
        return fn(req)

    def backend(self, req: Request) -> str:
        return req.backend or self.backends[0]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A row's defaults applied to a request, its model checked."""

    model: str
    spec: Any  # memprof.core.models.ModelSpec
    tp: int
    batch: int
    gpu: str
    context: int  # 0: the row takes no context


@cache
def rows() -> tuple[ValidationRow, ...]:
    """Every validation, in ``MODULES`` order (their modules are pure data: no torch)."""
    out: list[ValidationRow] = []
    for name in MODULES:
        out += importlib.import_module(name).VALIDATIONS
    return tuple(out)


def by_flag(flag: str) -> ValidationRow | None:
    return next((r for r in rows() if r.flag == flag), None)


def by_name(name: str) -> ValidationRow:
    """The row of a result's ``kernel``."""
    for r in rows():
        if r.name == name:
            return r
    raise BadInput(f"unknown validation kernel {name[:40]!r}",
                   hint="one of: " + ", ".join(r.name for r in rows()))


def __getattr__(name: str) -> tuple[str, ...]:
    """``KERNELS`` (the --kernel values) and ``BACKENDS`` (the --attention-backend values),
    read from the rows when help is shown (``Option.choices_from``)."""
    if name == "KERNELS":
        return (*(r.flag for r in rows()), ALL)
    if name == "BACKENDS":
        return tuple(b for r in rows() for b in r.backends)
    raise AttributeError(name)


def prepare(row: ValidationRow, req: Request) -> Prepared:
    """The row's defaults for what ``req`` leaves out; the model is loaded and checked: it has
    the row's attention kind, whose heads split over the TP size, and the context fits it."""
    from memprof.core.models import load_model

    name = req.model or row.models[0]
    spec = load_model(name)
    tp = req.tp or row.tp
    if row.attention is not None:
        layers = [lay for lay in spec.layers if lay.attention.kind == row.attention]
        if not layers:
            raise BadInput(f"{spec.name} has no {row.attention_label} attention layers for the "
                           f"{row.what}", hint=" or ".join(row.models) + " (memprof models)")
        heads = layers[0].attention.num_heads
        if heads % tp:
            raise BadInput(f"{heads} attention heads do not split over TP {tp}",
                           hint="use a TP size that divides the head count")
    ctx = 0
    if row.context_cuda is not None:
        ctx = req.context or (row.context_cuda if req.device == "cuda" else CONTEXT_CPU)
        if spec.max_position_embeddings is not None and ctx > spec.max_position_embeddings:
            raise BadInput(f"--context {ctx} is over {spec.name}'s max_position_embeddings "
                           f"{spec.max_position_embeddings}", hint="use a shorter --context")
    return Prepared(model=name, spec=spec, tp=tp, batch=req.batch or row.batch,
                    gpu=req.gpu or row.gpu, context=int(ctx))


# --- what the blocks are made of ------------------------------------------------------------------


def ok(flag: bool | None) -> str:
    """A check's word: pass, FAIL, or n/a (did not run)."""
    return "n/a" if flag is None else ("pass" if flag else "FAIL")


def opt_bytes(n: int | None) -> str:
    return "" if n is None else fmt_bytes(n)


def match(flag: bool | None) -> str:
    return "" if flag is None else ("yes" if flag else "NO")


def ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def parity_line(tag: str, p: Parity, *, dtype: bool = False) -> str:
    """One parity check's report line (``tag``: the policy, or ``kernel``)."""
    tol = f"tol {p.tol:g}, {p.dtype}" if dtype else f"tol {p.tol:g}"
    return (f"  parity [{tag}] {p.name}: max abs {p.max_abs:.3g}, rel {p.rel:.3g} ({tol}) "
            f"{ok(p.passed)}")


def speed_line(what: str, ratio: float, passed: bool | None) -> str:
    """The speed check's report line: ``what`` (``shared / per-layer step time``), the ratio
    and the criterion, ``MAX_SHARED_RATIO``."""
    return f"  speed: {what} {ratio:.3f} (≤ {MAX_SHARED_RATIO:g}) {ok(passed)}"


def verdict_line(v: Validation) -> str:
    return f"  {v.kernel}: {'PASS' if v.passed else 'FAIL'}"
