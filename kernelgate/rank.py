"""Rerank screened candidates: which one to keep.

The order, best first:

1. status: ``accept`` > ``repair`` > ``structural`` > ``untimed`` > ``reject``. A correct kernel
   with a fixable defect is worth more to a loop than one the library beats for reasons a
   rewrite cannot touch, and both more than one never timed; a reject is never kept.
2. within a status, the conservative LRE first: the low end of its 95% interval (a kernel that is
   surely at 0.9 beats one that is 1.0 give or take 0.5), then the point estimate, then roofline
   utilization ``U``. Verdicts without metrics (untimed, reject) tie here.
3. then the confidence of the status, then the earlier position in the input (a stable sort).
"""

from __future__ import annotations

from typing import Iterable, TypeVar

from kernelgate.models import Status, Verdict

__all__ = ["STATUS_ORDER", "rank", "rank_key", "best"]

STATUS_ORDER = (Status.accept, Status.repair, Status.structural, Status.untimed, Status.reject)
"""Statuses from best to worst."""

_POSITION = {status: i for i, status in enumerate(STATUS_ORDER)}

T = TypeVar("T", bound=Verdict)


def rank_key(verdict: Verdict) -> tuple:
    """A sort key: smaller is better (see the module docstring for the order)."""
    m = verdict.metrics
    if m is None:
        speed = (0.0, 0.0, 0.0)
    else:
        speed = (-m.lre_low, -m.lre, -m.u_candidate)
    return (_POSITION[verdict.status], *speed, -verdict.confidence)


def rank(verdicts: Iterable[T]) -> list[T]:
    """The verdicts from best to worst; equal keys keep their input order."""
    return sorted(verdicts, key=rank_key)


def best(verdicts: Iterable[T]) -> T | None:
    """The best verdict that is not a reject, or None when every one is (or there are none)."""
    ranked = [v for v in rank(verdicts) if v.status is not Status.reject]
    return ranked[0] if ranked else None
