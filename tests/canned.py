"""Real verdicts from canned measurements: ``screen`` with a runner that returns what a GPU worker would.

The store, ranking and report tests need timed verdicts (accept, repair) that a CPU machine cannot
measure. These go through the real pipeline (roofline, diagnosis, policy, feedback); only the
worker's measurement is canned.
"""

from __future__ import annotations

import statistics

from kernelgate.gate import screen
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
    TimeStats,
    TimingReport,
    TrialResult,
    Verdict,
)
from kernelgate.worker import Job, WorkerResult

SOURCE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def layernorm(x, w, b):
    return x
# variant {tag}
"""

ROWS = COLS = 4096
LIBRARY_MS = [0.035, 0.036, 0.034, 0.035, 0.035, 0.037, 0.033]


class CannedRunner:
    def __init__(self, measurement: Measurement) -> None:
        self.measurement = measurement

    def run(self, job: Job) -> WorkerResult:
        return WorkerResult(measurement=self.measurement.model_copy(deep=True), exit="ok", seconds={"job": 0.5})


def _stats(samples: list[float]) -> TimeStats:
    ordered = sorted(samples)
    med = statistics.median(samples)
    return TimeStats(median_ms=med, p20_ms=ordered[1], p80_ms=ordered[-2], min_ms=ordered[0], reps=len(samples),
                     wall_median_ms=med + 0.01, samples_ms=samples)


def measurement(candidate_ms: list[float] | None, *, flops: float = 5.0 * ROWS * COLS,
                failure: Reason | None = None, block: int = 4096) -> Measurement:
    """A worker's measurement on an H200: timed when ``candidate_ms`` is given, a failure when ``failure`` is."""
    trials = [TrialResult(distribution="normal", passed=failure is None, normalized_error=0.01, max_abs_error=1e-6)]
    numerics = NumericsReport(checked=True, passed=failure is None, executor="gpu", trials=trials, atol=1e-4, rtol=1e-4)
    env = Environment(device=DeviceInfo(name="NVIDIA H200", compute_capability="9.0", sm_count=132), python="3.12.0",
                      torch="2.13.0", dsl_versions={"triton": "3.6.0"}, allow_tf32_matmul=False, allow_tf32_cudnn=True)
    kernel = KernelArtifact(name="_k", dsl="triton", target="cuda:90", launches=1, num_warps=8, shared_bytes=0,
                            registers=40, spill_bytes=0, grid=[4096], constexprs={"BLOCK": block},
                            asm={"ptx": "ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1];"})
    cost = Cost(flops=flops, bytes_compulsory=(2.0 * ROWS * COLS + 2.0 * COLS) * 4, math_mode=MathMode.fp32,
                peak_mode=MathMode.fp32, estimate="catalogue:layernorm")
    timing = None
    if candidate_ms is not None:
        timing = TimingReport(candidate=_stats(candidate_ms), library=_stats(LIBRARY_MS), l2_flush_bytes=256 << 20,
                              input_sets=3, rounds=1, launch_overhead_ms=0.01)
    fail = Failure(reason=failure, stage="numerics", message="trial 1 (normal): max |c - r| = 3.2 <b>") if failure else None
    return Measurement(failure=fail, numerics=numerics, kernels=[kernel], timing=timing, environment=env, cost=cost,
                       stage_seconds={"load": 0.2, "timing": 1.0})


def verdict(name: str, candidate_ms: list[float] | None, **kw) -> Verdict:
    """A verdict for candidate ``name`` against the layernorm op at 4096x4096 on a (canned) H200."""
    problem = Problem.op("layernorm", rows=ROWS, cols=COLS)
    cand = Candidate(source=SOURCE.format(tag=name), entry="layernorm", name=name)
    return screen(cand, problem, runner=CannedRunner(measurement(candidate_ms, **kw)))


def scaled(factor: float) -> list[float]:
    return [t * factor for t in LIBRARY_MS]
