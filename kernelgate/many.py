"""Screen many candidates: lanes per visible GPU, verdicts streamed as they finish.

    from kernelgate.many import screen_many
    for result in screen_many([(cand, problem), ...]):
        result.index, result.verdict.status            # in the order they finish

Each lane owns one device (its workers see only it, through ``CUDA_VISIBLE_DEVICES``). By
default a lane screens one candidate at a time, with a spare worker started ahead. With
``concurrency`` above 1 (``default_concurrency`` suggests half the CPU cores per GPU, at most 8)
its workers start, compile, check numerics and build artifacts side by side, and each candidate
is timed alone: ``kernelgate.turns`` gives the timing an exclusive turn on the lane, during which
no numerics run and every other worker is stopped (``TurnPool``). That is opt-in. A short
kernel's host launch work, slowed by the lane's other workers, can outlast the L2 flush before its
start event; the timing's launch window (``ScreenOptions.timing_launch_window_ms``) keeps it out
of the measured time, and with it a lane of 12 kept every kernel's LRE within 3% over three runs
(``benchmarks/results/throughput_h200.json``). Every worker serves exactly one candidate. Without a GPU nothing is timed, so several one-at-a-time lanes
share the CPU.

Nothing is lost or duplicated: each index comes back exactly once. A candidate that kills its
worker is a ``reject`` verdict, as with ``screen``. A fault of the gate itself (a worker that
cannot start) is retried once on a fresh worker; if it fails again, or the problem cannot be
built, the result carries ``error`` instead of a verdict.

Where the time goes: each result carries the verdict's seconds per stage (``stage_seconds``:
worker_start, turn_wait and timing_wait in a concurrent lane, worker_wait, load, numerics with
its parts compile, trials, probes, kernel_profile and timing_inputs, artifacts, timing, job,
total) and when it finished; ``summarize(results)`` turns a run into candidates per hour, median
seconds per stage and counts by status.
``kernelgate.ray_pool.screen_many_ray`` gives the same stream on a Ray cluster.
"""

from __future__ import annotations

import os
import queue
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from kernelgate.errors import KernelgateError, ProblemError, WorkerError
from kernelgate.models import Candidate, Problem, Verdict
from kernelgate.policy import DEFAULT_POLICY, Policy
from kernelgate.worker import Job, ScreenOptions, TurnPool, WorkerPool, WorkerResult

__all__ = ["ScreenResult", "screen_many", "summarize", "visible_devices", "default_concurrency", "Lane"]


@dataclass
class ScreenResult:
    """One candidate's outcome in a ``screen_many`` run."""

    index: int
    """Position of the candidate in the input."""
    verdict: Verdict | None
    error: str | None = None
    """A fault of the gate or of the problem (not the candidate's): no verdict could be made."""
    lane: str = ""
    """The device (``CUDA_VISIBLE_DEVICES`` value) or CPU lane that screened it."""
    attempts: int = 1
    seconds: float = 0.0
    """Wall-clock seconds this candidate took, retries included."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """The verdict's seconds per stage (``Verdict.seconds``): worker_wait, load, numerics (of which
    compile, trials, probes, kernel_profile, timing_inputs), artifacts, timing (GPU only), job, total.
    Empty without a verdict."""
    finished_at_s: float = 0.0
    """When it came back, in seconds after the run started (``summarize`` takes the run's wall time
    from the last one)."""


_STAGE_ORDER = ("worker_start", "turn_wait", "timing_wait", "worker_wait", "load", "numerics", "compile", "trials",
                "probes", "kernel_profile", "timing_inputs", "artifacts", "timing", "job", "total")


def summarize(results: Iterable[ScreenResult], wall_seconds: float | None = None) -> dict[str, Any]:
    """A run in numbers: throughput, where the time went, and what came out.

    ``wall_seconds``: the run's wall time; default the latest ``finished_at_s``. Returns plain
    data (JSON-ready): ``candidates``, ``wall_seconds``, ``candidates_per_hour`` (None for an
    empty or instant run), ``by_status`` (verdict statuses, and ``error`` for results without a
    verdict), ``by_reason`` (reject reasons), ``median_seconds`` (per candidate, retries
    included), ``median_stage_seconds`` (per stage, over the results that reached it),
    ``by_lane`` (candidates per lane) and ``retried`` (results that took more than one attempt).
    """
    results = list(results)
    wall = wall_seconds if wall_seconds is not None else max((r.finished_at_s for r in results), default=0.0)
    by_status = Counter(r.verdict.status.value if r.verdict is not None else "error" for r in results)
    by_reason = Counter(r.verdict.reason.value for r in results if r.verdict is not None and r.verdict.reason)
    stages: dict[str, list[float]] = {}
    for r in results:
        for stage, secs in r.stage_seconds.items():
            stages.setdefault(stage, []).append(secs)
    order = [s for s in _STAGE_ORDER if s in stages] + sorted(set(stages) - set(_STAGE_ORDER))
    return {
        "candidates": len(results),
        "wall_seconds": round(wall, 3),
        "candidates_per_hour": round(len(results) * 3600.0 / wall, 1) if results and wall > 0 else None,
        "by_status": dict(sorted(by_status.items())),
        "by_reason": dict(sorted(by_reason.items())),
        "median_seconds": round(statistics.median(r.seconds for r in results), 3) if results else None,
        "median_stage_seconds": {s: round(statistics.median(stages[s]), 4) for s in order},
        "by_lane": dict(sorted(Counter(r.lane for r in results).items())),
        "retried": sum(1 for r in results if r.attempts > 1),
    }


def visible_devices() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` values (none without a GPU)."""
    try:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        count = 0
    if count == 0:
        return []
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def default_concurrency(gpus: int) -> int:
    """Candidates screened at once per GPU: half the CPU cores per GPU (compiles are CPU-bound), 1 to 8."""
    return max(1, min(8, (os.cpu_count() or 2) // (2 * max(1, gpus))))


@dataclass
class Lane:
    """One device's share of the work: workers that see only that device."""

    name: str
    env: dict[str, str] | None = None
    spares: int = 1
    concurrency: int = 1
    """Candidates in flight at once; above 1 they take turns on the GPU (``TurnPool``)."""
    pool: WorkerPool | TurnPool | None = field(default=None, init=False)

    def start(self) -> None:
        if self.concurrency > 1:
            self.pool = TurnPool(self.concurrency, env=self.env)
        else:
            self.pool = WorkerPool(spares=self.spares, env=self.env)

    def run(self, job: Job) -> WorkerResult:
        return self.pool.run(job)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def _lanes(devices: list[str] | None, cpu_lanes: int | None, spares: int, concurrency: int | None) -> list[Lane]:
    devices = visible_devices() if devices is None else devices
    if devices:
        per_gpu = concurrency or 1
        return [Lane(name=f"cuda:{d}", env={**os.environ, "CUDA_VISIBLE_DEVICES": d}, spares=spares,
                     concurrency=per_gpu) for d in devices]
    count = cpu_lanes or max(1, (os.cpu_count() or 2) // 2)
    return [Lane(name=f"cpu:{i}", env=None, spares=spares) for i in range(count)]


def _work_items(items: Iterable[Candidate | tuple[Candidate, Problem]],
               problem: Problem | None) -> list[tuple[int, Candidate, Problem | None]]:
    """(index, candidate, its problem) for each item: a pair's own problem, else ``problem``, else
    ``Candidate.problem`` (None: the candidate's result carries the error)."""
    work = []
    for index, item in enumerate(items):
        candidate, own = item if isinstance(item, tuple) else (item, None)
        work.append((index, candidate, own or problem or candidate.problem))
    return work


def _screen_with_retry(candidate: Candidate, spec: Problem | None, policy: Policy, options: ScreenOptions | None,
                       runner) -> tuple[Verdict | None, str | None, int]:
    """``screen`` once, or twice after a ``WorkerError``: (verdict, error, attempts), never raises.

    ``runner`` gives each attempt a fresh worker. A fault of the gate or of the problem becomes
    ``error`` (text), so the caller can report the candidate instead of losing it.
    """
    from kernelgate.gate import screen

    attempts, verdict, error = 0, None, None
    while verdict is None and error is None:
        attempts += 1
        try:
            if spec is None:
                raise ProblemError("no problem given for this candidate")
            verdict = screen(candidate, spec, policy=policy, options=options, runner=runner)
        except WorkerError as exc:  # the gate's fault, not the candidate's: once more on a fresh worker
            if attempts >= 2:
                error = f"worker fault, twice: {exc}"
        except KernelgateError as exc:
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a gate bug must not lose the candidate
            error = f"internal fault: {type(exc).__name__}: {exc}"
    return verdict, error, attempts


def screen_many(items: Iterable[Candidate | tuple[Candidate, Problem]], problem: Problem | None = None, *,
                policy: Policy = DEFAULT_POLICY, options: ScreenOptions | None = None,
                devices: list[str] | None = None, cpu_lanes: int | None = None, spares: int = 1,
                concurrency: int | None = None, lanes: list | None = None) -> Iterator[ScreenResult]:
    """Screen every candidate; yield a ``ScreenResult`` as each one finishes.

    ``items``: candidates (all against ``problem``, or each its own ``Candidate.problem``), or
    ``(candidate, problem)`` pairs. ``devices``: ``CUDA_VISIBLE_DEVICES`` values, one lane each
    (default: every visible GPU; none visible: ``cpu_lanes`` lanes, default half the cores).
    ``concurrency``: candidates in flight per GPU lane (default 1: one at a time, with ``spares``
    workers started ahead; more: ``TurnPool``, see the module's note on timing).
    ``lanes``: ready-made runners with ``name``, ``start``, ``run(job)``, ``close`` and optionally
    ``concurrency`` (tests).
    Stopping the iteration early stops the lanes after their current candidate.
    ``summarize(list(screen_many(...)))`` gives throughput and seconds per stage.
    """
    if options is not None and options.ncu:  # its process would run on no lane's device, outside the turns
        raise ValueError("ScreenOptions.ncu is for screen(): the Nsight Compute pass runs outside screen_many's "
                         "lanes and their GPU turns")
    work = _work_items(items, problem)
    total = len(work)
    if total == 0:
        return
    jobs: queue.Queue = queue.Queue()
    for entry in work:
        jobs.put(entry)
    lanes = lanes if lanes is not None else _lanes(devices, cpu_lanes, spares, concurrency)
    lanes = lanes[:total]
    done: queue.Queue = queue.Queue()
    stop = threading.Event()
    run_began = time.perf_counter()

    def serve(lane) -> None:
        while not stop.is_set():
            try:
                index, candidate, spec = jobs.get_nowait()
            except queue.Empty:
                return
            began = time.perf_counter()
            verdict, error, attempts = _screen_with_retry(candidate, spec, policy, options, lane)
            now = time.perf_counter()
            done.put(ScreenResult(index=index, verdict=verdict, error=error, lane=lane.name, attempts=attempts,
                                  seconds=round(now - began, 3),
                                  stage_seconds=dict(verdict.seconds) if verdict is not None else {},
                                  finished_at_s=round(now - run_began, 3)))

    threads = []
    try:
        for lane in lanes:
            lane.start()
        threads = [threading.Thread(target=serve, args=(lane,), name=f"kernelgate-{lane.name}-{slot}", daemon=True)
                   for lane in lanes for slot in range(getattr(lane, "concurrency", 1))]
        for thread in threads:
            thread.start()
        for _ in range(total):
            yield done.get()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        for lane in lanes:
            lane.close()
