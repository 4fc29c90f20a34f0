"""kernelgate.gate: screen's assembly of a verdict, with kernelgate.testing.FakeRunner (no worker process)."""

from __future__ import annotations

import statistics

import pytest

from kernelgate import __version__
from kernelgate.gate import metrics_of, screen
from kernelgate.hardware import SPEC_TABLE, DeviceInfo, MathMode
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
)
from kernelgate.policy import Policy
from kernelgate.testing import FakeRunner
from kernelgate.worker import ScreenOptions

H200 = SPEC_TABLE["H200-SXM-141GB"]

TRITON_SOURCE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def layernorm(x, w, b):
    return x
"""

ROWS = COLS = 4096
FLOPS = 5.0 * ROWS * COLS
BYTES = (2.0 * ROWS * COLS + 2.0 * COLS) * 4
FLOOR_MS = BYTES / (H200.bw_gbs * 1e9) * 1e3  # memory-bound on the H200 datasheet row, ~0.02797 ms


def _problem() -> Problem:
    return Problem.op("layernorm", rows=ROWS, cols=COLS)


def _candidate(source: str = TRITON_SOURCE, **over) -> Candidate:
    return Candidate(source=source, entry="layernorm", name="cand.py", metadata={"sample": 7}, **over)


def _numerics(passed: bool = True, checked: bool = True) -> NumericsReport:
    return NumericsReport(checked=checked, passed=passed and checked, executor="gpu" if checked else "none",
                          trials=[TrialResult(distribution="normal", passed=passed)] if checked else [],
                          skipped_reason=None if checked else "too large")


def _stats(samples: list[float], wall: float | None = None) -> TimeStats:
    ordered = sorted(samples)
    med = statistics.median(samples)
    return TimeStats(median_ms=med, p20_ms=ordered[1], p80_ms=ordered[-2], min_ms=ordered[0], reps=len(samples),
                     wall_median_ms=med + 0.01 if wall is None else wall, samples_ms=samples)


def _timing(candidate_ms: list[float], library_ms: list[float], wall: float | None = None) -> TimingReport:
    return TimingReport(candidate=_stats(candidate_ms, wall), library=_stats(library_ms), l2_flush_bytes=256 << 20,
                        input_sets=3, rounds=1, launch_overhead_ms=0.01)


def _cost() -> Cost:
    return Cost(flops=FLOPS, bytes_compulsory=BYTES, math_mode=MathMode.fp32, peak_mode=MathMode.fp32,
                estimate="catalogue:layernorm")


def _environment(device_name: str | None = "NVIDIA H200") -> Environment:
    device = None if device_name is None else DeviceInfo(name=device_name, compute_capability="9.0", sm_count=132)
    return Environment(device=device, python="3.12.0", torch="2.13.0", dsl_versions={"triton": "3.6.0"},
                       allow_tf32_matmul=False, allow_tf32_cudnn=True)


def _good_kernel(**over) -> KernelArtifact:
    fields = dict(name="_k", dsl="triton", target="cuda:90", launches=1, num_warps=8, shared_bytes=0,
                  registers=40, spill_bytes=0, grid=[4096], constexprs={"BLOCK": 4096},
                  asm={"ptx": "ld.global.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1];"})
    fields.update(over)
    return KernelArtifact(**fields)


def _timed(candidate_ms: list[float], library_ms: list[float], kernels=None, wall: float | None = None) -> Measurement:
    return Measurement(numerics=_numerics(), kernels=[_good_kernel()] if kernels is None else kernels,
                       timing=_timing(candidate_ms, library_ms, wall), environment=_environment(), cost=_cost(),
                       stage_seconds={"load": 0.2, "timing": 1.0})


FAST = [0.040, 0.041, 0.039, 0.040, 0.042, 0.038, 0.040]      # median 0.040 ms -> U ~ 0.70
LIBRARY = [0.035, 0.036, 0.034, 0.035, 0.035, 0.037, 0.033]   # median 0.035 ms -> LRE 0.875
SLOW = [0.100, 0.101, 0.099, 0.100, 0.102, 0.098, 0.100]      # median 0.100 ms -> LRE 0.35


# --- canned failure --------------------------------------------------------------------------


def test_canned_failure_gives_reject_with_its_reason():
    failure = Failure(reason=Reason.numerics_mismatch, stage="numerics",
                      message="trial normal: max |c - r| = 3.2 at [0, 5]")
    m = Measurement(failure=failure, numerics=_numerics(passed=False), environment=_environment(),
                    timing=_timing(FAST, LIBRARY), cost=_cost())
    runner = FakeRunner(m)
    v = screen(_candidate(), _problem(), runner=runner)
    assert len(runner.jobs) == 1
    assert v.status is Status.reject
    assert v.reason is Reason.numerics_mismatch
    assert v.failure == failure
    assert v.metrics is None  # a failed candidate gets no efficiency claim even with timings
    assert v.feedback.startswith("Rejected")
    assert v.feedback.startswith("Rejected (numerics_mismatch).")
    assert "3.2 at [0, 5]" in v.feedback
    assert v.summary == "cand.py: reject (numerics_mismatch)"
    assert v.confidence > 0.9


@pytest.mark.parametrize("reason", [Reason.compile_error, Reason.crash, Reason.run_timeout, Reason.wrong_shape])
def test_every_canned_failure_reason_is_passed_through(reason):
    m = Measurement(failure=Failure(reason=reason, stage="load", message="boom"))
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert v.status is Status.reject and v.reason is reason
    assert v.feedback.startswith(f"Rejected ({reason.value}).")
    assert v.feedback.endswith("boom")


# --- the job handed to the runner ------------------------------------------------------------


def test_job_carries_candidate_problem_and_options():
    runner = FakeRunner(_timed(FAST, LIBRARY))
    opts = ScreenOptions(timing_reps=7)
    screen(_candidate(), _problem(), runner=runner, options=opts)
    (job,) = runner.jobs
    assert job.candidate.dsl == "triton"  # detected and filled in
    assert job.candidate.source == TRITON_SOURCE
    assert job.problem == _problem()
    assert job.options.timing_reps == 7


def test_problem_taken_from_candidate():
    runner = FakeRunner(_timed(FAST, LIBRARY))
    v = screen(_candidate(problem=_problem()), runner=runner)
    assert v.problem == _problem()
    assert runner.jobs[0].problem == _problem()


def test_no_problem_at_all_is_a_value_error():
    with pytest.raises(ValueError, match="needs a problem"):
        screen(_candidate(), runner=FakeRunner(unreachable=True))


# --- timed measurement -----------------------------------------------------------------------


def test_timed_measurement_gives_metrics_and_accept():
    runner = FakeRunner(_timed(FAST, LIBRARY))
    v = screen(_candidate(), _problem(), runner=runner)
    m = v.metrics
    assert m is not None
    assert m.t_candidate_ms == pytest.approx(0.040)
    assert m.t_library_ms == pytest.approx(0.035)
    assert m.lre == pytest.approx(statistics.median(LIBRARY) / statistics.median(FAST))
    assert m.lre == pytest.approx(0.875)
    assert m.lre_low <= m.lre <= m.lre_high
    assert m.peaks == H200  # datasheet row: no calibration cache in KERNELGATE_CACHE_DIR
    assert m.peaks.kind == "datasheet"
    assert m.bound == "memory"
    assert m.t_floor_ms == pytest.approx(FLOOR_MS)
    assert m.u_candidate == pytest.approx(FLOOR_MS / 0.040)
    assert m.u_library == pytest.approx(FLOOR_MS / 0.035)
    assert m.u_physics == pytest.approx(FLOOR_MS / 0.040)
    assert m.flops == FLOPS and m.bytes_compulsory == BYTES and m.math_mode is MathMode.fp32

    assert v.status is Status.accept
    assert v.reason is None
    assert v.feedback.startswith("Accepted")
    assert "cand.py: accept; LRE 0.88" in v.summary
    # evidence is kept
    assert v.dsl == "triton"
    assert v.candidate_name == "cand.py"
    assert v.candidate_sha256 == _candidate().source_sha256
    assert v.candidate_metadata == {"sample": 7}
    assert v.numerics.passed and v.timing is not None and v.cost == _cost()
    assert v.environment.device.name == "NVIDIA H200"
    assert v.kernelgate_version == __version__
    assert v.seconds["load"] == 0.2 and v.seconds["job"] == 0.5 and "total" in v.seconds


def test_verdict_kernels_have_no_asm():
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(FAST, LIBRARY)))
    assert [k.name for k in v.kernels] == ["_k"]
    assert v.kernels[0].asm == {}
    assert v.kernels[0].num_warps == 8


def test_slow_candidate_without_finding_is_repair_with_unexplained_gap():
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(SLOW, LIBRARY)))
    assert v.metrics.lre == pytest.approx(0.35)
    assert v.status is Status.repair
    assert v.confidence <= 0.3
    assert [f.code for f in v.findings] == ["unexplained_gap"]
    assert v.feedback.startswith("Correct but slow.")
    assert "unexplained_gap" in v.feedback
    assert "2.9x slower than the library" in v.feedback


def test_slow_candidate_with_finding_is_repair_citing_it():
    tiny = _good_kernel(num_warps=1, constexprs={"BLOCK": 32}, grid=[524288])
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(SLOW, LIBRARY, kernels=[tiny])))
    assert v.status is Status.repair
    assert [f.code for f in v.findings] == ["tiny_block"]
    assert v.confidence == pytest.approx(0.8)
    assert "tiny_block" in v.feedback


def test_findings_do_not_stop_an_accept():
    tiny = _good_kernel(num_warps=1, constexprs={"BLOCK": 32}, grid=[524288])
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(FAST, LIBRARY, kernels=[tiny])))
    assert v.status is Status.accept
    assert [f.code for f in v.findings] == ["tiny_block"]


def test_custom_policy_reaches_the_decision():
    m = _timed(FAST, LIBRARY)
    strict = Policy(lre_min=1.0)  # LRE 0.875 is now flagged
    v = screen(_candidate(), _problem(), runner=FakeRunner(m), policy=strict)
    assert v.status is Status.repair


def test_policy_reject_for_unsynchronized_work_records_a_failure():
    # wall 5 ms (less 0.01 overhead) vs 0.04 ms of events: > 3 * 0.04 + 0.2
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(FAST, LIBRARY, wall=5.0)))
    assert v.status is Status.reject
    assert v.reason is Reason.unsynchronized_work
    assert v.failure is not None and v.failure.stage == "policy" and v.failure.reason is Reason.unsynchronized_work
    assert v.feedback.startswith("Rejected (unsynchronized_work).")
    assert v.metrics is not None  # the evidence for the reject is kept


def test_the_judges_stream_clock_reaches_the_policy():
    # events claim 0.040 ms; the judge's clock over 100 calls back to back saw 0.2 ms per call
    m = _timed(FAST, LIBRARY)
    m.timing = m.timing.model_copy(update={"stream_calls": 100, "stream_ms": 0.2, "stream_cpu_ms": 0.01,
                                           "library_stream_ms": 0.035, "stream_overhead_ms": 0.3})
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert v.status is Status.reject and v.reason is Reason.unsynchronized_work
    assert "100 calls back to back" in v.failure.message
    m.timing = m.timing.model_copy(update={"stream_ms": 0.045})
    assert screen(_candidate(), _problem(), runner=FakeRunner(m)).status is Status.accept


def test_policy_reject_for_impossible_speed():
    impossible = [FLOOR_MS / 2 * f for f in (1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0)]
    v = screen(_candidate(), _problem(), runner=FakeRunner(_timed(impossible, LIBRARY)))
    assert v.status is Status.reject
    assert v.reason is Reason.exceeds_roofline
    assert v.metrics.u_physics == pytest.approx(2.0, rel=0.02)
    assert v.feedback.startswith("Rejected (exceeds_roofline).")


# --- nothing timed ---------------------------------------------------------------------------


def test_no_timing_gives_untimed_without_metrics():
    m = Measurement(numerics=_numerics(), kernels=[_good_kernel()], environment=_environment(), cost=_cost(),
                    notes=["no GPU: numerics in the interpreter"])
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert v.status is Status.untimed
    assert v.metrics is None
    assert v.reason is None
    assert v.feedback.startswith("Correct on the checks that could run; not timed.")
    assert v.summary == "cand.py: untimed (not timed)"
    assert v.notes == ["no GPU: numerics in the interpreter"]


def test_timing_without_a_device_gives_untimed():
    m = _timed(FAST, LIBRARY)
    m.environment = _environment(device_name=None)
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert metrics_of(m) is None
    assert v.status is Status.untimed and v.metrics is None


def test_unchecked_numerics_lower_untimed_confidence():
    checked = screen(_candidate(), _problem(), runner=FakeRunner(Measurement(numerics=_numerics())))
    unchecked = screen(_candidate(), _problem(),
                       runner=FakeRunner(Measurement(numerics=_numerics(checked=False))))
    assert checked.status is unchecked.status is Status.untimed
    assert unchecked.confidence < checked.confidence


def test_untimed_with_repairable_finding_is_repair():
    spilling = _good_kernel(spill_bytes=512)
    m = Measurement(numerics=_numerics(), kernels=[spilling], cost=_cost(), environment=_environment())
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert v.status is Status.repair
    assert v.metrics is None
    assert [f.code for f in v.findings] == ["register_spills"]


# --- failures found before any runner --------------------------------------------------------


def test_unparsable_source_is_syntax_error_without_runner():
    v = screen(_candidate("def forward(x:\n    return x\n"), _problem(), runner=FakeRunner(unreachable=True))
    assert v.status is Status.reject
    assert v.reason is Reason.syntax_error
    assert v.failure.stage == "load"
    assert "line 1" in v.failure.message
    assert v.feedback.startswith("Rejected (syntax_error). Fix the syntax error.")
    assert v.dsl is None and v.metrics is None


def test_nul_byte_source_is_syntax_error_without_runner():
    v = screen(_candidate("x = 1\0\n"), _problem(), runner=FakeRunner(unreachable=True))
    assert v.status is Status.reject and v.reason is Reason.syntax_error


def test_source_without_dsl_is_no_kernel_launched_without_runner():
    src = "import torch\n\ndef layernorm(x, w, b):\n    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)\n"
    v = screen(_candidate(src), _problem(), runner=FakeRunner(unreachable=True))
    assert v.status is Status.reject
    assert v.reason is Reason.no_kernel_launched
    assert "triton" in v.failure.message
    assert v.feedback.startswith("Rejected (no_kernel_launched).")
    assert v.candidate_sha256 == _candidate(src).source_sha256


def test_triton_mentioned_only_in_a_comment_is_not_a_dsl_import():
    src = "# uses triton later\nimport torch\n"
    v = screen(_candidate(src), _problem(), runner=FakeRunner(unreachable=True))
    assert v.reason is Reason.no_kernel_launched


def test_unknown_dsl_is_a_plugin_error():
    from kernelgate.errors import PluginError

    with pytest.raises(PluginError):
        screen(_candidate(dsl="no-such-dsl"), _problem(), runner=FakeRunner(unreachable=True))


def test_retime_threshold_follows_the_policy():
    runner = FakeRunner(Measurement(failure=Failure(reason=Reason.crash, message="x", stage="load")))
    screen(Candidate(source=TRITON_SOURCE, entry="layernorm"), Problem.op("layernorm"),
           policy=Policy(u_impossible=1.05), runner=runner)
    assert runner.jobs[0].options.physics_limit == 1.05
    screen(Candidate(source=TRITON_SOURCE, entry="layernorm"), Problem.op("layernorm"),
           policy=Policy(u_impossible=2.0), runner=runner)
    assert runner.jobs[1].options.physics_limit == ScreenOptions().physics_limit


def test_a_dsl_source_that_does_not_parse_costs_no_worker():
    runner = FakeRunner(Measurement())
    v = screen(Candidate(source=TRITON_SOURCE + "\ndef broken(:\n"), Problem.op("layernorm"), runner=runner)
    assert v.status is Status.reject and v.reason is Reason.syntax_error and v.dsl == "triton"
    assert runner.jobs == []


def test_the_verdict_carries_the_screens_memory_report():
    from kernelgate.models import MemoryReport

    memory = MemoryReport(footprint_bytes=64 << 20, judge_peak_bytes=150 << 20, candidate_peak_bytes=80 << 20,
                          judge_peak_by_phase={"numerics": 150 << 20})
    m = Measurement(numerics=_numerics(passed=True), environment=_environment(), timing=_timing(FAST, LIBRARY),
                    cost=_cost(), memory=memory)
    v = screen(_candidate(), _problem(), runner=FakeRunner(m))
    assert v.memory == memory
