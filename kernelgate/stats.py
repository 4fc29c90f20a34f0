"""Statistics of timings, in pure Python: the parent (which never imports torch) computes LRE's
interval here, and the judge decides when timing may stop."""

from __future__ import annotations

import math
import statistics
from typing import Sequence

__all__ = ["median_interval", "enough_samples", "lre_interval"]


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median of the distribution the samples come from.

    With the samples sorted, x(1) <= ... <= x(n), the number B of samples below the true median
    is Binomial(n, 1/2) whatever the distribution, so for a rank j

        P(x(j) <= median <= x(n+1-j)) = 1 - 2 P(B <= j-1)     (continuous distributions; >= with ties)

    The interval is [x(j), x(n+1-j)] for the largest j with 2 P(B <= j-1) <= 1 - confidence:
    at 95%, j = 2 of 10 samples (ranks 2 and 9), j = 10 of 30 (ranks 10 and 21). None when no
    rank qualifies (fewer than 6 samples at 95%: even the full range covers the median less
    often). Pure Python, exact binomial sums.
    """
    n = len(samples)
    if not 0 < confidence < 1 or n == 0:
        return None
    alpha_half = (1.0 - confidence) / 2.0
    j, tail = 0, 0.0  # tail = P(B <= j - 1) for the current j
    while j < n // 2:
        next_tail = tail + math.comb(n, j) / 2.0 ** n
        if next_tail > alpha_half:
            break
        j, tail = j + 1, next_tail
    if j == 0:
        return None
    ordered = sorted(samples)
    return ordered[j - 1], ordered[n - j]


def enough_samples(candidate_ms: Sequence[float], library_ms: Sequence[float], *, rel_halfwidth: float = 0.01,
                   min_reps: int = 10, confidence: float = 0.95) -> bool:
    """Are both medians known well enough to stop timing?

    True when each side has at least ``min_reps`` samples, all finite, a positive median, and the
    ``confidence`` interval of its median (``median_interval``, order statistics) lies within
    ``median * (1 +- rel_halfwidth)``. Both sides must qualify: LRE is their ratio, so its
    relative error is at most about the sum of the two.

    Deciding this after every pair of repetitions is optional stopping, so the interval at the
    stop covers the median somewhat less often than its nominal level; ``min_reps`` (at least 10
    by default, where the interval is ranks 2..9, so 8 of 10 samples must fall within the band)
    keeps a lucky early run from stopping the loop, and LRE's own bootstrap interval is computed
    from whatever samples were taken.
    """
    if rel_halfwidth <= 0:
        return False
    for samples in (candidate_ms, library_ms):
        if len(samples) < max(1, min_reps) or not all(math.isfinite(s) for s in samples):
            return False
        median = statistics.median(samples)
        interval = median_interval(samples, confidence)
        if median <= 0 or interval is None:
            return False
        low, high = interval
        if median - low > rel_halfwidth * median or high - median > rel_halfwidth * median:
            return False
    return True


def lre_interval(library_ms: list[float], candidate_ms: list[float], *, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float, float]:
    """LRE = median(library) / median(candidate) with a 95% bootstrap interval.

    Pure Python on purpose: it runs in the parent, which never needs torch.
    """
    import random

    rng = random.Random(seed)
    estimate = statistics.median(library_ms) / statistics.median(candidate_ms)
    ratios = []
    for _ in range(resamples):
        lib = [rng.choice(library_ms) for _ in library_ms]
        cand = [rng.choice(candidate_ms) for _ in candidate_ms]
        ratios.append(statistics.median(lib) / statistics.median(cand))
    ratios.sort()
    return estimate, ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]
