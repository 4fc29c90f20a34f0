"""Time the candidate and the library in the same process, interleaved, on the same inputs.

Per repetition, for each side in alternating order: synchronize the device, enqueue a write of
a buffer larger than the L2 (so neither side finds the other's data in cache) and optionally a
GPU idle stretch (``launch_window_ms``), record a start event, call, record an end event,
synchronize the whole device, read the host clock. The events give the kernel time; the host
clock under a device-wide sync sees work on every stream, so a candidate that hides work on a
side stream shows a wall time far above its event time. The host time to enqueue each call is
recorded too (``TimeStats.host_median_ms``).
Inputs rotate over several distinct sets (fresh contents and addresses). The candidate's last
output on each set is kept for a recheck after timing (``keep``).

Adaptive stopping (``time_pair(adaptive=True)``; in a screen ``ScreenOptions.timing_adaptive``,
off by default; measured on the H200 by ``benchmarks/throughput.py --adaptive``): after each pair
of repetitions past ``min_reps``, the loop stops once ``enough_samples`` finds both medians known
well enough, a distribution-free 95% interval of each median within ``rel_halfwidth`` of it. A
slow, steady kernel then takes 10 repetitions instead of 30; a noisy one still takes up to
``reps``. ``TimingReport.stopped`` says which limit ended the loop.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Sequence

import torch

from kernelgate.models import TimeStats, TimingReport
from kernelgate.stats import enough_samples, lre_interval, median_interval  # noqa: F401  (re-exported)

__all__ = ["time_pair", "time_split", "split_window", "SPLIT_WINDOWS_MS", "time_library_alone", "launch_overhead_ms", "sleep_cycles_per_ms", "stats", "lre_interval", "median_interval",
           "enough_samples"]

L2_FLUSH_BYTES = 256 << 20
"""Four times the H200's 60 MB L2 (and larger than any current GPU's)."""


def l2_flush_buffer(device: str | torch.device = "cuda") -> torch.Tensor:
    """A buffer larger than L2; ``fill_(1)`` on it evicts the L2 (ints, so the write cannot be
    skipped as zeros)."""
    return torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)


MAX_LAUNCH_WINDOW_MS = 5.0
WINDOW_MARGIN = 2.0
"""The launch window covers twice the slowest warm-up enqueue: a timed call also waits for the
timing loop's own launches (flush, idle kernel, events), which the warm-up calls do not."""


def stats(samples: list[float], walls: list[float], hosts: list[float] | None = None,
          late: int | None = None) -> TimeStats:
    ordered = sorted(samples)

    def quantile(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return TimeStats(median_ms=statistics.median(samples), p20_ms=quantile(0.2), p80_ms=quantile(0.8),
                     min_ms=ordered[0], reps=len(samples), wall_median_ms=statistics.median(walls),
                     host_median_ms=statistics.median(hosts) if hosts else None, host_late_reps=late,
                     samples_ms=[round(s, 6) for s in samples])


def launch_overhead_ms(reps: int = 50) -> float:
    """Median wall-clock cost of one tiny launch plus a device sync: the timer's own floor."""
    x = torch.ones(1, device="cuda")
    walls = []
    for _ in range(reps + 5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls[5:])


def sleep_cycles_per_ms() -> float:
    """GPU clock cycles per millisecond of ``torch.cuda._sleep``, measured (the clock varies by part)."""
    cycles = 200_000
    torch.cuda._sleep(cycles)  # first call loads the kernel
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates = []
    for _ in range(3):
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        rates.append(cycles / max(start.elapsed_time(end), 1e-6))
    return statistics.median(rates)


def launch_window(least_ms: float, warm_host_ms: Sequence[float]) -> float:
    """The GPU idle time to give each timed call: ``least_ms``, widened to ``WINDOW_MARGIN`` times
    the slowest host enqueue of the warm-up calls (at most ``MAX_LAUNCH_WINDOW_MS``), so that a
    wrapper whose Python takes longer than the fixed window is not charged its host time. 0 stays
    0 (no window at all)."""
    if least_ms <= 0:
        return 0.0
    needed = WINDOW_MARGIN * max(warm_host_ms, default=0.0)
    return round(max(least_ms, min(MAX_LAUNCH_WINDOW_MS, needed)), 3)


def _time_once(fn: Callable, inputs: list, flush: torch.Tensor,
               window_cycles: int) -> tuple[float, float, float, bool, object]:
    """One call: (event ms, wall ms from the start event to a device-wide sync, host enqueue ms,
    whether the host was late, output)."""
    before, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    torch.cuda.synchronize()
    t_before = time.perf_counter()
    before.record()
    # Evict the L2 (ints, so the write cannot be skipped as zeros). No sync after it: the GPU is
    # busy flushing, then idles ``window_cycles`` on purpose, while the host runs the call's
    # Python and launches, so host-side launch cost hides as it would behind earlier work in a
    # real program. Without the idle stretch the window is only the flush (about 60 us on an
    # H200), and a wrapper that takes longer on a busy host is charged the difference.
    flush.fill_(1)
    if window_cycles:
        torch.cuda._sleep(window_cycles)
    start.record()
    t_call = time.perf_counter()
    out = fn(*inputs)
    t_enqueued = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    t_done = time.perf_counter()
    # Wall: host time from ``before`` to the sync, less the GPU's time from ``before`` to
    # ``start`` (flush, idle stretch, and any wait for a slow host): what remains runs from the
    # start event to the device-wide sync, so work left on other streams shows in it.
    ready_ms = before.elapsed_time(start)
    wall = (t_done - t_before) * 1e3 - ready_ms
    # Late: the host was still enqueueing when the GPU reached the start event, so the event time
    # includes host work (an upper bound: the kernels may have gone out before the call returned).
    late = (t_enqueued - t_before) * 1e3 > ready_ms
    return start.elapsed_time(end), max(0.0, wall), (t_enqueued - t_call) * 1e3, late, out


def time_pair(candidate: Callable, library: Callable, input_sets: list[list], *, warmup: int = 3,
              reps: int = 30, max_seconds: float = 30.0, rounds: int = 1,
              keep: dict[int, object] | None = None, adaptive: bool = False, min_reps: int = 10,
              rel_halfwidth: float = 0.01, launch_window_ms: float = 0.0) -> TimingReport:
    """Interleaved timings of both callables; stops early (>= 5 reps) past ``max_seconds``.

    ``adaptive``: also stop once ``enough_samples(..., rel_halfwidth, min_reps)`` holds, checked
    after each pair of repetitions (each side then went first equally often) once at least
    ``min_reps`` and one pass over the input sets are done; ``reps`` stays the cap.
    ``launch_window_ms``: the least GPU idle time after each flush (``launch_window``: widened to
    cover the host time the warm-up calls took to enqueue).
    ``keep``, when given, receives the candidate's output of its last timed call on each input set
    (by index), so the caller can recheck what was timed.
    """
    flush = l2_flush_buffer()
    with torch.no_grad():
        warm_hosts: list[float] = []  # host ms to enqueue each warm-up call after the first round
        for i in range(warmup):
            for fn in (candidate, library):
                began = time.perf_counter()
                fn(*input_sets[i % len(input_sets)])
                if i > 0 or warmup == 1:
                    warm_hosts.append((time.perf_counter() - began) * 1e3)
            torch.cuda.synchronize()
        window_ms = launch_window(launch_window_ms, warm_hosts)
        window_cycles = int(window_ms * sleep_cycles_per_ms()) if window_ms > 0 else 0
        overhead = launch_overhead_ms()
        times: dict[str, list[float]] = {"candidate": [], "library": []}
        walls: dict[str, list[float]] = {"candidate": [], "library": []}
        hosts: dict[str, list[float]] = {"candidate": [], "library": []}
        late: dict[str, int] = {"candidate": 0, "library": 0}
        began = time.perf_counter()
        stopped = "max_reps"
        for rep in range(reps):
            inputs = input_sets[rep % len(input_sets)]
            order = (("candidate", candidate), ("library", library))
            for side, fn in order if rep % 2 == 0 else order[::-1]:
                event_ms, wall_ms, host_ms, host_late, out = _time_once(fn, inputs, flush, window_cycles)
                if keep is not None and side == "candidate":
                    keep[rep % len(input_sets)] = out
                del out
                times[side].append(event_ms)
                walls[side].append(wall_ms)
                hosts[side].append(host_ms)
                late[side] += host_late
            taken = rep + 1
            if (adaptive and taken % 2 == 0 and taken >= max(min_reps, len(input_sets))
                    and enough_samples(times["candidate"], times["library"], rel_halfwidth=rel_halfwidth,
                                       min_reps=min_reps)):
                stopped = "converged"
                break
            if 5 <= taken < reps and time.perf_counter() - began > max_seconds:
                stopped = "max_seconds"
                break
    del flush
    return TimingReport(candidate=stats(times["candidate"], walls["candidate"], hosts["candidate"], late["candidate"]),
                        library=stats(times["library"], walls["library"], hosts["library"], late["library"]),
                        l2_flush_bytes=L2_FLUSH_BYTES, input_sets=len(input_sets), rounds=rounds,
                        launch_overhead_ms=overhead, stopped=stopped,
                        launch_window_ms=window_ms if window_cycles else 0.0)


SPLIT_WINDOWS_MS = (0.2, 0.5, 1.0, 2.0, 5.0)
"""The idle windows a candidate in its own process is timed with: the window ``launch_window``
asks for, rounded up to one of these, whose harness cost was calibrated before the candidate was
loaded (the GPU's sleep lasts longer than its nominal length when the clocks are low)."""


def split_window(least_ms: float, warm_host_ms: Sequence[float]) -> float:
    """``launch_window``, rounded up to a calibrated ``SPLIT_WINDOWS_MS`` step."""
    wanted = launch_window(least_ms, warm_host_ms)
    return next((w for w in SPLIT_WINDOWS_MS if w >= wanted - 1e-9), SPLIT_WINDOWS_MS[-1])


def time_split(candidate: Callable[[int, int, bool], tuple[object, object]], library: Callable,
               input_sets: list[list], *, refill: Callable[[int], None],
               check: Callable[[int, object, object, object, float], None], warmup: int = 3, reps: int = 30, max_seconds: float = 30.0, rounds: int = 1,
               adaptive: bool = False, min_reps: int = 10, rel_halfwidth: float = 0.01,
               launch_window_ms: float = 0.2, overhead_ms: dict[float, float] | None = None,
               resolution_ms: float | None = None) -> TimingReport:
    """Interleaved timings of the library (here) and of a candidate in another process.

    ``candidate(index, window_cycles, warm)`` asks the candidate's process for one call on input
    set ``index``, returning its reply (``event_ms``, ``host_ms``, ``late``) and the output slot
    the judge reads. Per repetition: ``refill(index)`` puts fresh values into the set (same
    addresses); then, in alternating order, the library is timed here (``_time_once``), and the
    candidate is timed by its own events after this process flushed the L2, with this process's
    clock around the whole request; then ``check(index, library_out, candidate_out, reply, wall_ms)``
    (outputs, inputs, launches, a claim longer than the wall). The candidate's wall sample is that
    clock; the policy compares it with the event times, less ``overhead_ms[window]``: the harness's own
    round trip at that window, calibrated before the candidate was loaded (``SPLIT_WINDOWS_MS``),
    with ``resolution_ms`` its measured spread. Adaptive stopping and ``max_seconds`` as in
    ``time_pair``.
    """
    flush = l2_flush_buffer()
    with torch.no_grad():
        warm_hosts: list[float] = []
        for i in range(warmup):
            index = i % len(input_sets)
            began = time.perf_counter()
            library(*input_sets[index])
            host = (time.perf_counter() - began) * 1e3
            reply, _ = candidate(index, 0, True)
            if i > 0 or warmup == 1:
                warm_hosts.append(host)
                if getattr(reply, "host_ms", None) is not None:
                    warm_hosts.append(reply.host_ms)
            torch.cuda.synchronize()
        window_ms = split_window(launch_window_ms, warm_hosts)
        window_cycles = int(window_ms * sleep_cycles_per_ms())
        times: dict[str, list[float]] = {"candidate": [], "library": []}
        walls: dict[str, list[float]] = {"candidate": [], "library": []}
        hosts: dict[str, list[float]] = {"candidate": [], "library": []}
        late: dict[str, int] = {"candidate": 0, "library": 0}
        runner: list[float] = []
        began = time.perf_counter()
        stopped = "max_reps"
        for rep in range(reps):
            index = rep % len(input_sets)
            refill(index)
            outs: dict[str, object] = {}
            reply = None
            for side in (("candidate", "library") if rep % 2 == 0 else ("library", "candidate")):
                if side == "library":
                    event_ms, wall_ms, host_ms, host_late, outs["library"] = _time_once(
                        library, input_sets[index], flush, window_cycles)
                else:
                    flush.fill_(1)
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    reply, outs["candidate"] = candidate(index, window_cycles, False)
                    wall_ms = (time.perf_counter() - t0) * 1e3  # the window's cost is in the calibration
                    event_ms, host_ms = float(reply.event_ms or 0.0), float(reply.host_ms or 0.0)
                    host_late = bool(reply.late)
                    if getattr(reply, "runner_ms", None) is not None:
                        runner.append(reply.runner_ms - window_ms)
                times[side].append(event_ms)
                walls[side].append(max(0.0, wall_ms))
                hosts[side].append(host_ms)
                late[side] += host_late
            check(index, outs["library"], outs["candidate"], reply, walls["candidate"][-1])
            del outs
            taken = rep + 1
            if (adaptive and taken % 2 == 0 and taken >= max(min_reps, len(input_sets))
                    and enough_samples(times["candidate"], times["library"], rel_halfwidth=rel_halfwidth,
                                       min_reps=min_reps)):
                stopped = "converged"
                break
            if 5 <= taken < reps and time.perf_counter() - began > max_seconds:
                stopped = "max_seconds"
                break
    del flush
    return TimingReport(candidate=stats(times["candidate"], walls["candidate"], hosts["candidate"], late["candidate"]),
                        library=stats(times["library"], walls["library"], hosts["library"], late["library"]),
                        l2_flush_bytes=L2_FLUSH_BYTES, input_sets=len(input_sets), rounds=rounds,
                        launch_overhead_ms=(overhead_ms or {}).get(window_ms, 0.0), stopped=stopped,
                        launch_window_ms=window_ms, wall_resolution_ms=resolution_ms,
                        runner_median_ms=statistics.median(runner) if runner else None)


def time_library_alone(library: Callable, input_sets: list[list], *, reps: int = 10,
                       launch_window_ms: float = 0.0) -> float:
    """The library's median event time, alone on the device (as in ``time_split``, same window)."""
    flush = l2_flush_buffer()
    window_cycles = int(launch_window_ms * sleep_cycles_per_ms()) if launch_window_ms > 0 else 0
    samples = []
    with torch.no_grad():
        library(*input_sets[0])
        for rep in range(reps):
            event_ms, *_ = _time_once(library, input_sets[rep % len(input_sets)], flush, window_cycles)
            samples.append(event_ms)
    del flush
    return statistics.median(samples)
