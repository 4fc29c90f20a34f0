"""Adaptive timing: the median's order-statistic interval, the stopping rule, and time_pair's loop.

The rule is pure Python and tested on synthetic samples (tight, noisy, bimodal, outliers). The
loop in ``time_pair`` is driven here with canned event times instead of CUDA events (the device
calls are replaced; the loop and its stopping logic are the real code); ``test_gpu_*`` runs it on
a GPU.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
from types import SimpleNamespace

import pytest
import torch

from kernelgate import ScreenOptions
from kernelgate import timing
from kernelgate.models import TimeStats, TimingReport
from kernelgate.timing import enough_samples, median_interval


def _binomial_cdf(n: int, k: int) -> float:
    """P(B <= k), B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def _ranks(n: int) -> tuple[int, int]:
    """Ranks (1-based) of the 95% interval's ends: the interval itself when the samples are 1..n."""
    low, high = median_interval(list(range(1, n + 1)))
    return int(low), int(high)


# --- median_interval ------------------------------------------------------------------------


@pytest.mark.parametrize("n, ranks", [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (30, (10, 21)), (100, (40, 61))])
def test_median_interval_matches_the_published_ranks(n, ranks):
    """The 95% distribution-free ranks of the median, as tabulated (e.g. Conover, Practical
    Nonparametric Statistics): n=10 -> 2..9, n=20 -> 6..15, n=100 -> 40..61."""
    assert _ranks(n) == ranks


@pytest.mark.parametrize("n", range(6, 61))
def test_median_interval_takes_the_narrowest_rank_with_enough_coverage(n):
    j, k = _ranks(n)
    assert k == n + 1 - j
    assert 1 - 2 * _binomial_cdf(n, j - 1) >= 0.95  # covers at least 95%
    assert 1 - 2 * _binomial_cdf(n, j) < 0.95  # one rank narrower would not


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_median_interval_is_none_when_no_rank_covers_95_percent(n):
    assert median_interval([1.0] * n) is None


def test_median_interval_other_confidence_and_unsorted_input():
    assert median_interval(list(range(10, 0, -1)), confidence=0.99) == (1, 10)  # P(B<=1) = 11/1024 > 0.005
    assert median_interval([5, 1, 4, 2, 3, 9, 8, 6, 7, 10]) == (2, 9)
    assert median_interval([1.0] * 10, confidence=1.0) is None


def test_median_interval_covers_the_true_median_at_least_95_percent():
    """Simulated coverage on a skewed distribution (exponential, median ln 2)."""
    rng = random.Random(1234)
    true_median = math.log(2.0)
    for n in (10, 15, 30):
        hits = 0
        for _ in range(3000):
            low, high = median_interval([rng.expovariate(1.0) for _ in range(n)])
            hits += low <= true_median <= high
        assert hits / 3000 >= 0.94, n  # nominal >= 0.95 (0.979 at n=10); 0.94 leaves room for chance


# --- enough_samples on synthetic samples ----------------------------------------------------


def _steady(n: int, median: float = 0.05, spread: float = 0.002, seed: int = 0) -> list[float]:
    """n samples within +-spread (relative) of median, in random order."""
    rng = random.Random(seed)
    return [median * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_tight_samples_are_enough_from_min_reps_on():
    cand, lib = _steady(10, 0.05), _steady(10, 0.04, seed=1)
    assert enough_samples(cand, lib)
    assert not enough_samples(cand[:9], lib[:9])  # below min_reps
    assert not enough_samples(cand, lib, min_reps=12)
    assert enough_samples(cand[:6], lib[:6], min_reps=6)  # 6: the full range is the interval, still tight


def test_noisy_samples_are_not_enough_unless_the_band_is_wide():
    cand, lib = _steady(30, 0.05, spread=0.08), _steady(30, 0.04, spread=0.08, seed=1)
    assert not enough_samples(cand, lib)
    assert enough_samples(cand, lib, rel_halfwidth=0.1)


def test_both_sides_must_be_known():
    tight, noisy = _steady(30), _steady(30, spread=0.08, seed=2)
    assert not enough_samples(tight, noisy)
    assert not enough_samples(noisy, tight)
    assert enough_samples(tight, tight)


def test_a_single_outlier_does_not_hold_the_loop_but_two_do_at_ten_samples():
    """Ranks 2..9 of 10 leave out one sample at either end; at 30 samples, ranks 10..21 leave nine."""
    base = _steady(10)
    one = base[:9] + [base[0] * 10]
    assert enough_samples(one, base)
    two = base[:8] + [base[0] * 10, base[0] * 12]
    assert not enough_samples(two, base)
    thirty = _steady(28, seed=3) + [1.0, 2.0]
    assert enough_samples(thirty, _steady(30, seed=4))
    low_outliers = _steady(28, seed=5) + [0.001, 0.002]  # fast outliers (a skipped call) count the same
    assert enough_samples(low_outliers, _steady(30, seed=4))


def test_bimodal_samples_never_converge_when_the_modes_split_the_samples():
    """Half the calls at one speed and half 20% slower: the median's interval spans both modes."""
    rng = random.Random(7)
    split = [0.05] * 15 + [0.06] * 15
    rng.shuffle(split)
    assert not enough_samples(split, _steady(30))
    mostly_fast = [0.05 * (1 + rng.uniform(-0.002, 0.002)) for _ in range(27)] + [0.075] * 3
    rng.shuffle(mostly_fast)
    assert enough_samples(mostly_fast, _steady(30))  # a 10% minority mode stays outside ranks 10..21


def test_the_band_is_relative_to_the_median_on_both_sides():
    # ranks 2 and 9 of 10 are 0.75 and 1.25: exactly +-25% of the median 1.0
    samples = [0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.25, 2.0]
    assert enough_samples(samples, samples, rel_halfwidth=0.25)
    assert not enough_samples(samples, samples, rel_halfwidth=0.24)
    lopsided = [0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0]  # only the low end is wide
    assert not enough_samples(lopsided, samples, rel_halfwidth=0.24)
    assert enough_samples([s * 1000 for s in samples], samples, rel_halfwidth=0.25)  # scale-free


def test_shuffling_does_not_change_the_answer():
    rng = random.Random(9)
    for seed in range(20):
        cand, lib = _steady(16, spread=0.012, seed=seed), _steady(16, spread=0.012, seed=seed + 100)
        answer = enough_samples(cand, lib)
        rng.shuffle(cand)
        rng.shuffle(lib)
        assert enough_samples(cand, lib) is answer


@pytest.mark.parametrize("samples", [_steady(11)[:10] + [math.nan], _steady(10)[:9] + [math.inf], [0.0] * 10, []],
                         ids=["nan", "inf", "zeros", "empty"])
def test_non_finite_zero_or_missing_samples_are_never_enough(samples):
    assert not enough_samples(samples, _steady(30), min_reps=1)
    assert not enough_samples(_steady(30), samples, min_reps=1)


def test_a_non_positive_band_is_never_met():
    assert not enough_samples([1.0] * 10, [1.0] * 10, rel_halfwidth=0.0)
    assert enough_samples([1.0] * 10, [1.0] * 10, rel_halfwidth=1e-9)


def test_steady_streams_stop_at_min_reps_noisy_ones_run_to_the_cap():
    """The rule applied as time_pair applies it, on lognormal streams of two noise levels."""

    def stop_after(sigma: float, seed: int) -> int:
        rng = random.Random(seed)
        cand, lib = [], []
        for taken in range(1, 31):
            cand.append(0.05 * rng.lognormvariate(0.0, sigma))
            lib.append(0.04 * rng.lognormvariate(0.0, sigma))
            if taken % 2 == 0 and enough_samples(cand, lib):
                return taken
        return 30

    assert [stop_after(0.002, seed) for seed in range(10)] == [10] * 10
    assert [stop_after(0.05, seed) for seed in range(10)] == [30] * 10


# --- time_pair's loop, with canned event times ----------------------------------------------


class _FakeDevice:
    """Replaces the device calls of time_pair: canned event times, a fake clock, no CUDA."""

    def __init__(self, monkeypatch, candidate_ms, library_ms, seconds_per_call: float = 0.001) -> None:
        self.samples = {"candidate": iter(candidate_ms), "library": iter(library_ms)}
        self.order: list[str] = []
        self.now = 0.0
        self.seconds_per_call = seconds_per_call
        fake_torch = SimpleNamespace(empty=lambda *a, **k: object(), int32=None, no_grad=contextlib.nullcontext,
                                     cuda=SimpleNamespace(synchronize=lambda: None))
        monkeypatch.setattr(timing, "torch", fake_torch)
        monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: self.now))
        monkeypatch.setattr(timing, "launch_overhead_ms", lambda: 0.01)
        monkeypatch.setattr(timing, "_time_once", self.time_once)

    def time_once(self, fn, inputs, flush, window_cycles):
        side = fn(*inputs)
        self.order.append(side)
        self.now += self.seconds_per_call
        event_ms = next(self.samples[side])
        return event_ms, event_ms + 0.005, 0.02, False, (side, inputs[0])


def _sides():
    return (lambda x: "candidate"), (lambda x: "library")


def test_time_pair_stops_when_converged(monkeypatch):
    device = _FakeDevice(monkeypatch, _steady(30), _steady(30, 0.04, seed=1))
    kept: dict = {}
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30, keep=kept, adaptive=True)
    assert report.stopped == "converged"
    assert report.candidate.reps == report.library.reps == 10
    assert sorted(kept) == [0, 1, 2]  # the last candidate output on every input set, for the recheck
    assert device.order[:4] == ["candidate", "library", "library", "candidate"]  # interleaved, alternating
    assert device.order.count("candidate") == device.order.count("library") == 10


def test_time_pair_without_adaptive_takes_every_rep(monkeypatch):
    _FakeDevice(monkeypatch, _steady(30), _steady(30, 0.04, seed=1))
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30)
    assert report.stopped == "max_reps" and report.candidate.reps == 30


def test_time_pair_noisy_runs_to_the_cap(monkeypatch):
    _FakeDevice(monkeypatch, _steady(30, spread=0.1), _steady(30, 0.04, seed=1))
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30, adaptive=True)
    assert report.stopped == "max_reps" and report.candidate.reps == report.library.reps == 30


def test_time_pair_checks_after_pairs_and_after_one_pass_over_the_inputs(monkeypatch):
    _FakeDevice(monkeypatch, _steady(30), _steady(30, 0.04, seed=1))
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30, adaptive=True, min_reps=7)
    assert report.stopped == "converged" and report.candidate.reps == 8  # 7 is odd: first check at 8
    _FakeDevice(monkeypatch, _steady(30), _steady(30, 0.04, seed=1))
    sets = [[i] for i in range(12)]
    report = timing.time_pair(*_sides(), sets, reps=30, adaptive=True, min_reps=6)
    assert report.stopped == "converged" and report.candidate.reps == 12  # every set timed once first


def test_time_pair_time_budget_still_applies(monkeypatch):
    _FakeDevice(monkeypatch, _steady(30, spread=0.1), _steady(30, 0.04, seed=1), seconds_per_call=0.5)
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30, max_seconds=6.5, adaptive=True)
    assert report.stopped == "max_seconds" and report.candidate.reps == 7  # 1 s per rep, past 6.5 s after 7


def test_time_pair_slow_steady_kernel_stops_before_the_time_budget(monkeypatch):
    """A 0.5 s kernel (the naive matmul on the H200) took 30 reps x 2 calls; adaptive needs 10."""
    _FakeDevice(monkeypatch, _steady(30, 490.0), _steady(30, 2.8, seed=1), seconds_per_call=0.25)
    report = timing.time_pair(*_sides(), [[0], [1], [2]], reps=30, max_seconds=60.0, adaptive=True)
    assert report.stopped == "converged" and report.candidate.reps == 10


# --- plumbing: options, the worker stage, the report model ------------------------------------


def test_screen_options_defaults_fixed_30_reps_adaptive_10_to_30_at_one_percent_when_asked():
    opts = ScreenOptions()  # adaptive stays off until measured on a GPU against the fixed 30
    assert (opts.timing_adaptive, opts.timing_min_reps, opts.timing_reps, opts.timing_rel_halfwidth) == (
        False, 10, 30, 0.01)
    with pytest.raises(ValueError):
        ScreenOptions(timing_min_reps=5)  # no 95% interval of a median below 6 samples
    with pytest.raises(ValueError):
        ScreenOptions(timing_rel_halfwidth=0)


def test_launch_window_covers_the_slowest_warm_up_enqueue_within_bounds():
    assert timing.launch_window(0.2, [0.01, 0.05]) == 0.2  # a quick wrapper keeps the least window
    assert timing.launch_window(0.2, [0.05, 0.4]) == pytest.approx(0.8)  # twice the slowest
    assert timing.launch_window(0.2, [30.0]) == timing.MAX_LAUNCH_WINDOW_MS  # a compile is not waited for
    assert timing.launch_window(0.2, []) == 0.2
    assert timing.launch_window(0.0, [0.4]) == 0.0  # no window asked for: none given


def test_timing_report_records_why_it_stopped():
    stats = TimeStats(median_ms=1.0, p20_ms=1.0, p80_ms=1.0, min_ms=1.0, reps=10, wall_median_ms=1.0)
    report = TimingReport(candidate=stats, library=stats, l2_flush_bytes=0, input_sets=3, rounds=1,
                          launch_overhead_ms=0.0, stopped="converged")
    assert TimingReport.model_validate_json(report.model_dump_json()).stopped == "converged"
    old = report.model_dump()
    del old["stopped"]
    assert TimingReport.model_validate(old).stopped is None  # reports from before the field still load
    with pytest.raises(ValueError):
        TimingReport.model_validate({**old, "stopped": "bored"})


# --- on a GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_time_pair_adaptive_on_a_real_op():
    """A 64 MB row sum timed against itself: the loop stops between 10 and 30 reps and says why."""
    x = [[torch.randn(4096, 4096, device="cuda")] for _ in range(3)]
    fn = lambda t: t.sum(dim=1)  # noqa: E731
    report = timing.time_pair(fn, fn, x, reps=30, adaptive=True)
    assert report.stopped in ("converged", "max_reps")
    assert 10 <= report.candidate.reps <= 30 and report.candidate.reps == report.library.reps
    if report.stopped == "converged":
        assert report.candidate.reps % 2 == 0
    else:
        assert report.candidate.reps == 30
    fixed = timing.time_pair(fn, fn, x, reps=12, adaptive=False)
    assert fixed.stopped == "max_reps" and fixed.candidate.reps == 12
    assert statistics.median(fixed.candidate.samples_ms) > 0


@pytest.mark.gpu
def test_gpu_launch_window_hides_host_work_shorter_than_it():
    """0.3 ms of host work before a 4 MB launch: charged without the idle window, hidden with 1 ms."""
    import time

    x = [[torch.randn(1 << 20, device="cuda")]]

    def slow_wrapper(t):
        began = time.perf_counter()
        while time.perf_counter() - began < 3e-4:  # Python before the launch, as a heavy wrapper has
            pass
        return t * 2

    def plain(t):
        return t * 2

    shut = timing.time_pair(slow_wrapper, plain, x, reps=20, launch_window_ms=0.0)
    assert shut.launch_window_ms == 0.0
    assert shut.candidate.median_ms > shut.library.median_ms + 0.15
    assert shut.candidate.host_median_ms >= 0.3 and shut.candidate.host_late_reps >= 15
    assert shut.library.host_late_reps <= 5
    open_ = timing.time_pair(slow_wrapper, plain, x, reps=20, launch_window_ms=1.0)
    assert open_.launch_window_ms == 1.0 and open_.candidate.host_late_reps <= 5
    assert open_.candidate.median_ms < open_.library.median_ms + 0.02
    assert open_.candidate.wall_median_ms < 0.5  # the window itself is not in the wall time
    sized = timing.time_pair(slow_wrapper, plain, x, reps=20, launch_window_ms=0.1)  # widened from the warm-up
    assert 0.6 <= sized.launch_window_ms <= timing.MAX_LAUNCH_WINDOW_MS and sized.candidate.host_late_reps <= 5
    assert sized.candidate.median_ms < sized.library.median_ms + 0.02
