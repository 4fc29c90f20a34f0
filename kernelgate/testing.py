"""Helpers for tests: ``assert_accepted`` for kernel authors, ``FakeRunner`` for tests of code that calls the gate.

    from kernelgate import Problem
    from kernelgate.testing import assert_accepted

    def test_my_rowsum():
        assert_accepted("kernels/rowsum.py", Problem.op("rowsum", rows=64, cols=1024), entry="kernel")

On a GPU the kernel must be ``accept``ed. Without one nothing can be timed, so an ``untimed``
verdict (numerics checked in the interpreter, no defect found in the compiled code) passes too,
unless ``allow_untimed_on_cpu=False``. On failure the ``AssertionError`` carries the verdict's
summary, reason, feedback and findings, so the test report says what to fix.

``FakeRunner`` stands in for the worker pool where a test needs verdicts without processes or a
GPU: ``screen(candidate, problem, runner=FakeRunner(fake_measurement(ms)))`` runs the real
pipeline (static checks, roofline, diagnosis, policy, feedback) on a scripted measurement.
``screen_many(..., lanes=[FakeRunner(...)])`` takes it as a lane. What it returns and how a test
scripts a verdict or a fault is in its docstring.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from kernelgate.errors import WorkerError
from kernelgate.hardware import DeviceInfo, MathMode
from kernelgate.models import (
    Candidate,
    Cost,
    Environment,
    Failure,
    KernelArtifact,
    Measurement,
    NumericsReport,
    Problem,
    Reason,
    Status,
    TimeStats,
    TimingReport,
    TrialResult,
    Verdict,
)
from kernelgate.policy import DEFAULT_POLICY, Policy
from kernelgate.worker import Job, ScreenOptions, WorkerResult

__all__ = ["assert_accepted", "FakeRunner", "fake_measurement", "LIBRARY_MS"]


def _source(source_or_path: str | Path) -> tuple[str, str | None]:
    if isinstance(source_or_path, Path) or ("\n" not in source_or_path and source_or_path.endswith(".py")):
        path = Path(source_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"kernel file not found: {path}")
        return path.read_text(), path.name
    return source_or_path, None


def assert_accepted(source_or_path: str | Path, problem: Problem, *, policy: Policy | None = None,
                    allow_untimed_on_cpu: bool = True, entry: str = "ModelNew", dsl: str | None = None,
                    options: ScreenOptions | None = None, runner=None) -> Verdict:
    """Screen the kernel (a source string or a ``.py`` path) and fail unless it is accepted.

    ``untimed`` passes only when ``allow_untimed_on_cpu`` is set and the screen ran without a GPU
    and the numerics were actually checked. Returns the verdict for further assertions.
    ``runner``: what runs the job (default: kernelgate's worker pool; a ``FakeRunner`` in tests).
    """
    from kernelgate.gate import screen

    source, name = _source(source_or_path)
    verdict = screen(Candidate(source=source, entry=entry, dsl=dsl, name=name), problem,
                     policy=policy or DEFAULT_POLICY, options=options, runner=runner)
    if verdict.status is Status.accept:
        return verdict
    no_gpu = verdict.environment is None or verdict.environment.device is None
    checked = bool(verdict.numerics and verdict.numerics.checked and verdict.numerics.passed)
    if verdict.status is Status.untimed and allow_untimed_on_cpu and no_gpu and checked:
        return verdict
    lines = [f"kernel not accepted: {verdict.summary}"]
    if verdict.status is Status.untimed:
        why = ("numerics were not checked" if not checked else "a GPU was present" if not no_gpu
               else "untimed verdicts are not allowed here (allow_untimed_on_cpu=False)")
        lines.append(f"untimed: {why}" + (f" ({verdict.numerics.skipped_reason})"
                                         if verdict.numerics and verdict.numerics.skipped_reason else ""))
    if verdict.reason is not None:
        lines.append(f"reason: {verdict.reason.value}")
    lines.append("feedback: " + verdict.feedback.replace("\n", "\n  "))
    lines += [f"finding: {f.code} ({f.kind}): {f.evidence}" for f in verdict.findings]
    raise AssertionError("\n".join(lines))


# --- the fake worker ----------------------------------------------------------------------------

LIBRARY_MS = [0.035, 0.036, 0.034, 0.035, 0.035, 0.037, 0.033]
"""The library's timed samples in ``fake_measurement`` (median 0.035 ms); scale it for a candidate's."""


def _stats(samples: list[float]) -> TimeStats:
    ordered = sorted(samples)
    med = statistics.median(samples)
    return TimeStats(median_ms=med, p20_ms=ordered[1], p80_ms=ordered[-2], min_ms=ordered[0], reps=len(samples),
                     wall_median_ms=med + 0.01, samples_ms=samples)


def fake_measurement(candidate_ms: list[float] | None = None, *, failure: Reason | None = None,
                     rows: int = 4096, cols: int = 4096, flops: float | None = None, block: int = 4096,
                     library_ms: list[float] | None = None) -> Measurement:
    """What a worker on an H200 would measure for a Triton layernorm candidate at ``rows`` x ``cols`` fp32.

    ``candidate_ms``: the candidate's timed samples (at least 3); ``None``: nothing timed. ``failure``:
    the candidate fails its numerics with that reason (the verdict is a ``reject``). The numerics
    otherwise pass on the GPU; one kernel (``_k``, ``BLOCK`` = ``block``, vectorized loads) is recorded.
    With ``candidate_ms`` near ``LIBRARY_MS`` the verdict is an ``accept``; three times slower, a ``repair``.
    """
    trials = [TrialResult(distribution="normal", passed=failure is None, normalized_error=0.01, max_abs_error=1e-6)]
    numerics = NumericsReport(checked=True, passed=failure is None, executor="gpu", trials=trials, atol=1e-4, rtol=1e-4)
    env = Environment(device=DeviceInfo(name="NVIDIA H200", compute_capability="9.0", sm_count=132), python="3.12.0",
                      torch="2.13.0", dsl_versions={"triton": "3.6.0"}, allow_tf32_matmul=False, allow_tf32_cudnn=True)
    kernel = KernelArtifact(name="_k", dsl="triton", target="cuda:90", launches=1, num_warps=8, shared_bytes=0,
                            registers=40, spill_bytes=0, grid=[rows], constexprs={"BLOCK": block},
                            asm={"ptx": "ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1];"})
    cost = Cost(flops=5.0 * rows * cols if flops is None else flops,
                bytes_compulsory=(2.0 * rows * cols + 2.0 * cols) * 4, math_mode=MathMode.fp32,
                peak_mode=MathMode.fp32, estimate="catalogue:layernorm")
    timing = None
    if candidate_ms is not None:
        timing = TimingReport(candidate=_stats(candidate_ms), library=_stats(library_ms or LIBRARY_MS),
                              l2_flush_bytes=256 << 20, input_sets=3, rounds=1, launch_overhead_ms=0.01)
    fail = Failure(reason=failure, stage="numerics", message="trial 1 (normal): max |c - r| = 3.2 <b>") if failure else None
    return Measurement(failure=fail, numerics=numerics, kernels=[kernel], timing=timing, environment=env, cost=cost,
                       stage_seconds={"load": 0.2, "timing": 1.0})


class FakeRunner:
    """A stand-in for kernelgate's worker pool: runs nothing, answers each job with a scripted measurement.

    ``run(job)`` appends the job to ``jobs`` and returns ``WorkerResult(measurement=<a deep copy>,
    exit="ok", seconds=seconds)``; ``screen`` turns that into the verdict as it would a worker's.
    What the measurement is:

    - ``measurement``: a ``Measurement`` (every job gets a copy of it), or a callable
      ``job -> Measurement`` to script one per candidate; default ``fake_measurement()`` (numerics
      passed, nothing timed: an ``untimed``-like result on a GPU device, see ``fake_measurement``).
    - a verdict is scripted by the measurement: ``fake_measurement(ms)`` for a timed one (accept,
      repair, structural by the samples), ``fake_measurement(failure=Reason.X)`` for a reject,
      ``Measurement(failure=Failure(...))`` for any other failure.

    Faults of the machinery, not of the candidate:

    - ``faults=N``: the first N runs raise ``WorkerError`` (``screen_many`` retries once, then
      records "worker fault, twice").
    - ``fault_for={"name", ...}``: every run of a candidate with that ``Candidate.name`` raises.
    - ``start_error``: ``start()`` raises it (a lane that cannot start).
    - ``unreachable=True``: any run raises ``AssertionError`` (for paths that must not reach a worker).

    As a ``screen_many`` lane it has ``name``, ``start``, ``close`` (``started``/``closed`` say they
    were called) and ``concurrency``. It is thread-safe.
    """

    def __init__(self, measurement: Measurement | Callable[[Job], Measurement] | None = None, *,
                 seconds: dict[str, float] | None = None, faults: int = 0, fault_for: Iterable[str] = (),
                 start_error: BaseException | None = None, unreachable: bool = False, name: str = "fake:0",
                 concurrency: int = 1) -> None:
        self.measurement = fake_measurement() if measurement is None else measurement
        self.seconds = {"worker_wait": 0.01, "job": 0.5} if seconds is None else seconds
        self.faults, self.fault_for = faults, set(fault_for)
        self.start_error, self.unreachable = start_error, unreachable
        self.name, self.concurrency = name, concurrency
        self.jobs: list[Job] = []
        self.started = self.closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        self.started = True
        if self.start_error is not None:
            raise self.start_error

    def close(self) -> None:
        self.closed = True

    def run(self, job: Job) -> WorkerResult:
        if self.unreachable:
            raise AssertionError(f"FakeRunner(unreachable=True) was given a job for {job.candidate.name!r}")
        with self._lock:
            self.jobs.append(job)
            if self.faults:
                self.faults -= 1
                raise WorkerError("worker failed to start: FakeRunner(faults=...)")
        if job.candidate.name in self.fault_for:
            raise WorkerError(f"worker failed to start: FakeRunner(fault_for={{{job.candidate.name!r}}})")
        m = self.measurement(job) if callable(self.measurement) else self.measurement
        return WorkerResult(measurement=m.model_copy(deep=True), exit="ok", log_tail="", seconds=dict(self.seconds))
