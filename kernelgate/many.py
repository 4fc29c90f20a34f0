"""Screen many candidates: one lane per visible GPU, verdicts streamed as they finish.

    from kernelgate.many import screen_many
    for result in screen_many([(cand, problem), ...]):
        result.index, result.verdict.status            # in the order they finish

Each lane owns one device (its workers see only it, through ``CUDA_VISIBLE_DEVICES``) and runs
one candidate at a time, so nothing else runs on a GPU while a candidate is timed there. Spare
workers are started ahead per lane, and every worker still serves exactly one candidate. Without a
GPU nothing is timed, so several lanes share the CPU.

Nothing is lost or duplicated: each index comes back exactly once. A candidate that kills its
worker is a ``reject`` verdict, as with ``screen``. A fault of the gate itself (a worker that
cannot start) is retried once on a fresh worker; if it fails again, or the problem cannot be
built, the result carries ``error`` instead of a verdict.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kernelgate.errors import KernelgateError, ProblemError, WorkerError
from kernelgate.models import Candidate, Problem, Verdict
from kernelgate.policy import DEFAULT_POLICY, Policy
from kernelgate.worker import Job, ScreenOptions, WorkerPool, WorkerResult

__all__ = ["ScreenResult", "screen_many", "visible_devices", "Lane"]


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


@dataclass
class Lane:
    """One device's share of the work: a pool of workers that see only that device."""

    name: str
    env: dict[str, str] | None = None
    spares: int = 1
    pool: WorkerPool | None = field(default=None, init=False)

    def start(self) -> None:
        self.pool = WorkerPool(spares=self.spares, env=self.env)

    def run(self, job: Job) -> WorkerResult:
        return self.pool.run(job)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def _lanes(devices: list[str] | None, cpu_lanes: int | None, spares: int) -> list[Lane]:
    devices = visible_devices() if devices is None else devices
    if devices:
        return [Lane(name=f"cuda:{d}", env={**os.environ, "CUDA_VISIBLE_DEVICES": d}, spares=spares)
                for d in devices]
    count = cpu_lanes or max(1, (os.cpu_count() or 2) // 2)
    return [Lane(name=f"cpu:{i}", env=None, spares=spares) for i in range(count)]


def screen_many(items: Iterable[Candidate | tuple[Candidate, Problem]], problem: Problem | None = None, *,
                policy: Policy = DEFAULT_POLICY, options: ScreenOptions | None = None,
                devices: list[str] | None = None, cpu_lanes: int | None = None, spares: int = 1,
                lanes: list | None = None) -> Iterator[ScreenResult]:
    """Screen every candidate; yield a ``ScreenResult`` as each one finishes.

    ``items``: candidates (all against ``problem``, or each its own ``Candidate.problem``), or
    ``(candidate, problem)`` pairs. ``devices``: ``CUDA_VISIBLE_DEVICES`` values, one lane each
    (default: every visible GPU; none visible: ``cpu_lanes`` lanes, default half the cores).
    ``lanes``: ready-made runners with ``name``, ``start``, ``run(job)`` and ``close`` (tests).
    Stopping the iteration early stops the lanes after their current candidate.
    """
    from kernelgate.gate import screen

    jobs: queue.Queue = queue.Queue()
    total = 0
    for index, item in enumerate(items):
        candidate, own = item if isinstance(item, tuple) else (item, None)
        jobs.put((index, candidate, own or problem or candidate.problem))
        total += 1
    if total == 0:
        return
    lanes = lanes if lanes is not None else _lanes(devices, cpu_lanes, spares)
    lanes = lanes[:total]
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def serve(lane) -> None:
        while not stop.is_set():
            try:
                index, candidate, spec = jobs.get_nowait()
            except queue.Empty:
                return
            began, attempts, verdict, error = time.perf_counter(), 0, None, None
            while verdict is None and error is None:
                attempts += 1
                try:
                    if spec is None:
                        raise ProblemError("no problem given for this candidate")
                    verdict = screen(candidate, spec, policy=policy, options=options, runner=lane)
                except WorkerError as exc:  # the gate's fault, not the candidate's: once more on a fresh worker
                    if attempts >= 2:
                        error = f"worker fault, twice: {exc}"
                except KernelgateError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                except Exception as exc:  # a gate bug must not lose the candidate
                    error = f"internal fault: {type(exc).__name__}: {exc}"
            done.put(ScreenResult(index=index, verdict=verdict, error=error, lane=lane.name, attempts=attempts,
                                  seconds=round(time.perf_counter() - began, 3)))

    threads = []
    try:
        for lane in lanes:
            lane.start()
        threads = [threading.Thread(target=serve, args=(lane,), name=f"kernelgate-{lane.name}", daemon=True)
                   for lane in lanes]
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
