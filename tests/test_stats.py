"""kernelgate.stats: the median's order-statistic interval, the stopping rule of timing, and LRE's
bootstrap interval, against hand-computed numbers and at their edges; and that the module is pure
Python (the parent, which never imports torch, computes LRE with it)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from kernelgate.stats import enough_samples, lre_interval, median_interval
from tests.conftest import ROOT


# ------------------------------------------------------------------ median_interval

def test_median_interval_ranks_match_the_docstring():
    # 95%: j = 2 of 10 (ranks 2 and 9), j = 10 of 30 (ranks 10 and 21)
    assert median_interval([float(i) for i in range(1, 11)]) == (2.0, 9.0)
    assert median_interval([float(i) for i in range(1, 31)]) == (10.0, 21.0)


def test_median_interval_by_hand_at_50_percent():
    # n = 10: P(B <= j-1) for j = 1..5 is 1, 11, 56, 176, 386 (/1024); alpha/2 = 0.25 = 256/1024 -> j = 4
    assert median_interval([float(i) for i in range(1, 11)], confidence=0.5) == (4.0, 7.0)


def test_median_interval_sorts_its_input_and_keeps_ties():
    assert median_interval([9.0, 1.0, 5.0, 3.0, 7.0, 2.0, 10.0, 4.0, 8.0, 6.0]) == (2.0, 9.0)
    assert median_interval([3.0] * 10) == (3.0, 3.0)


def test_median_interval_small_samples_and_bad_confidence():
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # 2 / 2**5 = 0.0625 > 0.05: no rank qualifies
    assert median_interval([6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) == (1.0, 6.0)  # 2 / 2**6 <= 0.05: the full range
    assert median_interval([]) is None
    for confidence in (0.0, 1.0, -0.5, 1.5):
        assert median_interval([float(i) for i in range(20)], confidence=confidence) is None


@pytest.mark.parametrize("n", [6, 7, 10, 11, 20, 30, 51, 100])
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_median_interval_is_the_narrowest_with_enough_coverage(n, confidence):
    """Coverage 1 - 2 P(B <= j-1) of ranks (j, n+1-j) is at least the level, and one rank further in is not."""
    low, high = median_interval([float(i) for i in range(1, n + 1)], confidence) or (None, None)

    def coverage(j: int) -> float:
        return 1 - 2 * sum(math.comb(n, k) for k in range(j)) / 2 ** n

    if low is None:
        assert coverage(1) < confidence
        return
    j = int(low)
    assert high == n + 1 - j
    assert coverage(j) >= confidence - 1e-12
    assert j + 1 > n // 2 or coverage(j + 1) < confidence


# ------------------------------------------------------------------ enough_samples

TIGHT = [1.0] * 10


def test_enough_samples_when_both_medians_are_tight():
    assert enough_samples(TIGHT, [2.0] * 10)
    # ranks 2..9 of 10 decide: one outlier at each end does not matter
    assert enough_samples([0.5] + [1.0] * 8 + [3.0], TIGHT)
    # within 1%: 0.995 and 1.005 around a median of 1.0
    assert enough_samples([0.99, 0.995] + [1.0] * 6 + [1.005, 1.2], TIGHT)


def test_not_enough_when_an_inner_rank_is_outside_the_band():
    assert not enough_samples([0.5, 0.5] + [1.0] * 8, TIGHT)  # rank 2 is 0.5
    assert not enough_samples([0.985, 0.985] + [1.0] * 8, TIGHT)  # 1.5% below
    assert not enough_samples(TIGHT, [1.0] * 8 + [1.02, 1.02])  # the library side alone fails
    # a wider band accepts what 1% did not
    assert enough_samples([0.985, 0.985] + [1.0] * 8, TIGHT, rel_halfwidth=0.02)


def test_enough_samples_edges():
    assert not enough_samples([1.0] * 9, TIGHT)  # fewer than min_reps
    assert enough_samples([1.0] * 9, TIGHT, min_reps=9)
    assert not enough_samples([1.0] * 5, [1.0] * 5, min_reps=5)  # 5 samples: no 95% interval
    assert not enough_samples([1.0] * 9 + [math.inf], TIGHT)
    assert not enough_samples([1.0] * 9 + [math.nan], TIGHT)
    assert not enough_samples([0.0] * 10, TIGHT)  # median not positive
    assert not enough_samples(TIGHT, TIGHT, rel_halfwidth=0.0)
    assert not enough_samples(TIGHT, TIGHT, rel_halfwidth=-0.1)
    assert not enough_samples([], [])


# ------------------------------------------------------------------ lre_interval

def test_lre_interval_constant_samples():
    assert lre_interval([2.0] * 10, [1.0] * 10) == (2.0, 2.0, 2.0)
    assert lre_interval([1.0] * 5, [4.0] * 7) == (0.25, 0.25, 0.25)


def test_lre_interval_by_hand():
    # library [1, 2, 3], candidate [1]: estimate 2; a resampled median of three draws is 1 with
    # probability 7/27 (and 3 with 7/27), far above 2.5%, so the interval is exactly (1, 3)
    assert lre_interval([1.0, 2.0, 3.0], [1.0]) == (2.0, 1.0, 3.0)
    # the candidate side inverts: library [6], candidate [1, 2, 3] -> 6/2, within (6/3, 6/1)
    assert lre_interval([6.0], [1.0, 2.0, 3.0]) == (3.0, 2.0, 6.0)


def test_lre_interval_is_seeded_and_brackets_the_estimate():
    lib = [1.0 + 0.01 * ((7 * i) % 13) for i in range(40)]
    cand = [2.0 + 0.03 * ((5 * i) % 11) for i in range(40)]
    a = lre_interval(lib, cand, seed=3)
    assert a == lre_interval(lib, cand, seed=3)
    est, low, high = a
    lib_median = (sorted(lib)[19] + sorted(lib)[20]) / 2  # 40 samples: the mean of ranks 20 and 21
    cand_median = (sorted(cand)[19] + sorted(cand)[20]) / 2
    assert est == pytest.approx(lib_median / cand_median)
    assert low <= est <= high and low < high
    few = lre_interval(lib, cand, resamples=40, seed=3)
    assert few[0] == est and few[1] <= few[2]


def test_lre_interval_needs_samples_on_both_sides():
    import statistics

    with pytest.raises(statistics.StatisticsError):
        lre_interval([], [1.0])
    with pytest.raises(statistics.StatisticsError):
        lre_interval([1.0], [])


def test_stats_is_pure_python():
    """Loaded on its own (not through the package), it pulls in neither torch nor numpy."""
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('kg_stats', {str(ROOT / 'kernelgate' / 'stats.py')!r})\n"
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "print(m.lre_interval([2.0, 2.0], [1.0, 1.0], resamples=10))\n"
            "print(sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'numpy', 'kernelgate')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == ["(2.0, 2.0, 2.0)", "[]"]
