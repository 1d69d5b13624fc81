"""Paged-cache helpers of the vectorised torch references (MLA, TurboQuant): requests grouped
by length so a group's padded temporaries stay small, and the pages and token mask of a group.

A reference that walks one request at a time pays Python and op-launch costs per request; one
that pads the whole batch to its longest request holds ``B × longest`` rows at once. Groups of
requests of similar length (ordered by length, each group padded to its own longest, whole pages)
keep both small.
"""

from __future__ import annotations

import math

import torch

# Temporaries of one group: about this many elements of gathered rows (4 MiB in fp32).
CHUNK_ELEMS = 1 << 20


def request_groups(lens: list[int], per_token: int) -> list[list[int]]:
    """Requests with tokens, ordered by length and grouped so that a group's padded K (its
    longest × ``per_token`` elements per request) stays near ``CHUNK_ELEMS``."""
    order = sorted((b for b, n in enumerate(lens) if n > 0), key=lambda b: lens[b])
    groups: list[list[int]] = []
    cur: list[int] = []
    for b in order:  # ascending: the last request added is the group's longest
        if cur and (len(cur) + 1) * lens[b] * per_token > CHUNK_ELEMS:
            groups.append(cur)
            cur = []
        cur.append(b)
    if cur:
        groups.append(cur)
    return groups


def gather_pages(block_table: torch.Tensor, idx: torch.Tensor, lens: torch.Tensor, n_max: int,
                 page: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Block ids ``(c, P)`` of requests ``idx`` (``P = ceil(n_max / page)``; a page past a
    request's last is block 0, never read as a token) and the ``(c, P·page)`` token mask."""
    n_pages = math.ceil(n_max / page)
    if block_table.shape[1] < n_pages:
        raise ValueError(f"block_table has {block_table.shape[1]} pages a request, "
                         f"{n_pages} needed for {n_max} tokens")
    pages = block_table[idx, :n_pages].long()  # (c, P)
    used = torch.arange(n_pages, device=pages.device)[None, :] * page < lens[:, None]  # (c, P)
    pages = pages.masked_fill(~used, 0)
    tok = torch.arange(n_pages * page, device=pages.device)[None, :] < lens[:, None]  # (c, P·pg)
    return pages, tok
