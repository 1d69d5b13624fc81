"""Every rank of a torchrun trace in one report: what each process sends rank 0 (its traced
figures, no estimate: rank 0 has the same one), the result rebuilt per rank on rank 0, and the
ranks grouped where their traced figures are equal (shown once, "ranks 0–3")."""

from __future__ import annotations

from dataclasses import dataclass, replace

from memprof.trace.run import ComponentTrace, PhaseRecord, TraceOOM, TraceResult


@dataclass(frozen=True, slots=True, kw_only=True)
class RankTrace:
    """One process's traced figures, as gathered: its global rank and what it measured."""

    rank: int
    device_name: str
    phases: tuple[PhaseRecord, ...]
    components: tuple[ComponentTrace, ...]
    verdict_traced: str
    notes: tuple[str, ...]
    graph_sizes: tuple[int, ...]
    oom: TraceOOM | None

    @staticmethod
    def of(rank: int, t: TraceResult) -> RankTrace:
        return RankTrace(rank=rank, device_name=t.device_name, phases=t.phases,
                         components=t.components, verdict_traced=t.verdict_traced,
                         notes=t.notes, graph_sizes=t.graph_sizes, oom=t.oom)

    def key(self) -> tuple[object, ...]:
        """What must be equal for two ranks to be shown once: every traced component."""
        return (tuple((c.name, c.estimated, c.traced) for c in self.components),
                self.verdict_traced, self.oom is None)


@dataclass(frozen=True, slots=True)
class GatheredTrace:
    """Rank 0's view of a torchrun trace: every rank's result (global rank, result) in rank
    order, each rebuilt on rank 0's estimate with that rank's own figures."""

    results: tuple[tuple[int, TraceResult], ...]

    @staticmethod
    def build(mine: TraceResult, gathered: list[RankTrace]) -> GatheredTrace:
        out = []
        for g in sorted(gathered, key=lambda x: x.rank):
            r = next((x for x in mine.estimate.ranks if g.rank in x.same_as), mine.rank)
            r = replace(r, coord=replace(r.coord, rank=g.rank))  # headed by its own index
            out.append((g.rank, replace(mine, rank=r, device_name=g.device_name,
                                        phases=g.phases, components=g.components,
                                        verdict_traced=g.verdict_traced, notes=g.notes,
                                        graph_sizes=g.graph_sizes, oom=g.oom)))
        return GatheredTrace(results=tuple(out))

    def distinct(self) -> list[tuple[list[int], TraceResult]]:
        """The ranks grouped by equal traced figures (first appearance order), each group with
        its first rank's result."""
        groups: dict[tuple[object, ...], tuple[list[int], TraceResult]] = {}
        for rank, t in self.results:
            k = RankTrace.of(rank, t).key()
            if k in groups:
                groups[k][0].append(rank)
            else:
                groups[k] = ([rank], t)
        return list(groups.values())

    @property
    def worst_oom(self) -> tuple[int, TraceOOM] | None:
        """The first rank that ran out of memory, with its OOM."""
        return next(((r, t.oom) for r, t in self.results if t.oom is not None), None)


def rank_span(ranks: list[int]) -> str:
    """``[0, 1, 2, 3]`` → "ranks 0–3"; ``[0, 2]`` → "ranks 0, 2"; ``[1]`` → "rank 1"."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))
