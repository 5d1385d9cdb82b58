"""Where the cached path's time goes: ``torch.profiler`` over one batch of ``bench gpu``'s rows.

Issue 36 item 4 asks what on a GPU is slow in the cached-record path (the padded per-head mask, the
attention function, the gather in compression). One profiled batch of compress + greedy decode, and
the same rows through the stock decode floor, each summarised as the operators that took the most
self time on the device (CUDA) or the host (CPU), written as a plain-text table a person reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

TOP = 25


def profile_table(work: Callable[[], object], device: torch.device, *, title: str, top: int = TOP) -> str:
    """Run ``work`` once under the profiler; the ``top`` operators by self time on ``device``, as text."""
    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        work()
        if cuda:
            torch.cuda.synchronize(device)
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=top, max_name_column_width=60)
    return f"## {title} (sorted by {sort_by})\n\n{table}\n"


def write_profiles(path: Path, sections: list[str], header: str) -> str:
    """Write the sections under ``header`` to ``path``; return the text (``bench gpu --json`` carries it too)."""
    text = header.rstrip() + "\n\n" + "\n".join(sections)
    path.write_text(text)
    return text
