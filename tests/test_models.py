"""Tests for kernelgate.models: JSON round trip and schema, the Verdict's evidence rules, constructors."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from kernelgate import __version__
from kernelgate.hardware import SPEC_TABLE, DeviceInfo, MathMode
from kernelgate.models import (
    Candidate,
    Cost,
    Environment,
    Failure,
    Finding,
    KernelArtifact,
    Measurement,
    Metrics,
    NumericsReport,
    Problem,
    Reason,
    Status,
    TimeStats,
    TimingReport,
    TrialResult,
    Verdict,
)

PEAKS = SPEC_TABLE["H200-SXM-141GB"]


def _metrics(**over) -> Metrics:
    fields = dict(t_candidate_ms=1.0, t_library_ms=0.9, lre=0.9, lre_low=0.85, lre_high=0.95, t_floor_ms=0.5,
                  u_candidate=0.5, u_library=0.55, u_physics=0.5, bound="memory", flops=1e6,
                  bytes_compulsory=2.4e9, peaks=PEAKS, math_mode=MathMode.fp32)
    fields.update(over)
    return Metrics(**fields)


def _numerics(passed: bool = True) -> NumericsReport:
    return NumericsReport(checked=True, passed=passed, executor="gpu",
                          trials=[TrialResult(distribution="normal", passed=passed, max_abs_error=1e-6,
                                              normalized_error=0.01, reference_normalized_error=0.005)],
                          state_copied=True, atol=1e-4, rtol=1e-4)


def _finding(kind: str = "repairable") -> Finding:
    return Finding(code="tiny_block", kind=kind, evidence="num_warps=1", hint="use bigger blocks", kernel="k")


def _verdict(**over) -> Verdict:
    fields = dict(status=Status.accept, confidence=0.9, summary="s", feedback="f", candidate_sha256="0" * 64,
                  problem=Problem.op("layernorm"), metrics=_metrics(), numerics=_numerics(),
                  kernelgate_version=__version__)
    fields.update(over)
    return Verdict(**fields)


def _full_verdict() -> Verdict:
    """A verdict with every nested model filled in."""
    stats = TimeStats(median_ms=1.0, p20_ms=0.9, p80_ms=1.1, min_ms=0.8, reps=5, wall_median_ms=1.2,
                      samples_ms=[1.0, 0.9, 1.1, 0.8, 1.0])
    return _verdict(
        status=Status.repair, confidence=0.8, candidate_name="cand.py", dsl="triton",
        problem=Problem.op("softmax", dtype="float16", rows=128, cols=256),
        candidate_metadata={"sample": 3, "gen": "x", "t": 0.5, "ok": True, "none": None},
        findings=[_finding(), Finding(code="unexplained_gap", kind="info", evidence="e", hint="h")],
        kernels=[KernelArtifact(name="k", dsl="triton", target="cuda:90", launches=2, num_warps=4, num_stages=3,
                                shared_bytes=1024, registers=32, spill_bytes=0, grid=[128, 1, 1],
                                constexprs={"BLOCK": 1024}, asm={})],
        timing=TimingReport(candidate=stats, library=stats, l2_flush_bytes=256 << 20, input_sets=3, rounds=1,
                            launch_overhead_ms=0.01),
        cost=Cost(flops=5.0, bytes_compulsory=8.0, math_mode=MathMode.fp16, peak_mode=MathMode.fp16,
                  estimate="catalogue:softmax"),
        environment=Environment(device=DeviceInfo(name="NVIDIA H200", compute_capability="9.0", sm_count=132),
                                python="3.12", torch="2.13", dsl_versions={"triton": "3.6.0"},
                                allow_tf32_matmul=False, allow_tf32_cudnn=True),
        notes=["a note"], seconds={"total": 1.5},
    )


# --- JSON ------------------------------------------------------------------------------------


def test_verdict_json_round_trip_is_equal():
    v = _full_verdict()
    back = Verdict.model_validate_json(v.model_dump_json())
    assert back == v
    assert back.metrics.peaks.flops_tflops[MathMode.tf32] == PEAKS.flops_tflops[MathMode.tf32]
    assert back.status is Status.repair


def test_reject_verdict_json_round_trip_keeps_reason_and_failure():
    v = _verdict(status=Status.reject, reason=Reason.crash, metrics=None, numerics=None, confidence=0.95,
                 failure=Failure(reason=Reason.crash, message="segfault", stage="load"))
    back = Verdict.model_validate_json(v.model_dump_json())
    assert back == v
    assert back.reason is Reason.crash and back.failure.message == "segfault"


def test_verdict_json_schema_has_status_and_docstring_descriptions():
    schema = Verdict.model_json_schema()
    props = schema["properties"]
    assert "status" in props
    assert "status" in schema["required"]
    assert "How sure the gate is" in props["confidence"]["description"]
    assert "reject" in props["reason"]["description"]
    defs = schema["$defs"]
    assert set(defs["Status"]["enum"]) == {s.value for s in Status}
    assert "t_library / t_candidate" in defs["Metrics"]["properties"]["lre"]["description"]
    assert "Whether a rewrite" in defs["Finding"]["properties"]["kind"]["description"]


# --- Verdict rules ---------------------------------------------------------------------------


def test_valid_verdicts_of_each_status_build():
    _verdict()
    _verdict(status=Status.repair, confidence=0.5)
    _verdict(status=Status.repair, metrics=None, findings=[_finding()], numerics=None)
    _verdict(status=Status.structural, findings=[_finding("structural")])
    _verdict(status=Status.untimed, metrics=None)
    _verdict(status=Status.reject, reason=Reason.numerics_mismatch, metrics=None, numerics=_numerics(False))


def test_reject_needs_a_reason():
    with pytest.raises(ValidationError, match="needs a reason"):
        _verdict(status=Status.reject, metrics=None)


@pytest.mark.parametrize("status", [Status.accept, Status.repair, Status.structural, Status.untimed])
def test_non_reject_carries_no_reason(status):
    metrics = None if status is Status.untimed else _metrics()
    with pytest.raises(ValidationError, match="carries no reject reason"):
        _verdict(status=status, reason=Reason.crash, metrics=metrics)


def test_accept_needs_metrics_even_with_findings():
    with pytest.raises(ValidationError, match="accept verdict needs timing metrics"):
        _verdict(status=Status.accept, metrics=None, findings=[_finding()])
    with pytest.raises(ValidationError, match="needs timing metrics"):
        _verdict(status=Status.accept, metrics=None)


@pytest.mark.parametrize("status", [Status.repair, Status.structural])
def test_timed_status_needs_metrics_or_findings(status):
    with pytest.raises(ValidationError, match="needs timing metrics or findings"):
        _verdict(status=status, metrics=None, findings=[])


def test_untimed_carries_no_metrics():
    with pytest.raises(ValidationError, match="untimed verdict carries no timing metrics"):
        _verdict(status=Status.untimed, metrics=_metrics())


@pytest.mark.parametrize("status", [Status.accept, Status.structural])
def test_accept_and_structural_need_passed_numerics(status):
    findings = [_finding("structural")]
    with pytest.raises(ValidationError, match="needs passed numerics"):
        _verdict(status=status, numerics=None, findings=findings)
    with pytest.raises(ValidationError, match="needs passed numerics"):
        _verdict(status=status, numerics=_numerics(passed=False), findings=findings)


def test_repair_and_untimed_do_not_need_passed_numerics():
    _verdict(status=Status.repair, numerics=None)
    _verdict(status=Status.untimed, metrics=None, numerics=NumericsReport(checked=False, passed=False))


def test_confidence_bounds():
    with pytest.raises(ValidationError):
        _verdict(confidence=1.5)
    with pytest.raises(ValidationError):
        _verdict(confidence=-0.1)


# --- Candidate / Problem ---------------------------------------------------------------------


def test_candidate_source_sha256():
    src = "import triton\nprint('hé')\n"
    c = Candidate(source=src)
    assert c.source_sha256 == hashlib.sha256(src.encode("utf-8")).hexdigest()
    assert len(c.source_sha256) == 64
    assert Candidate(source=src + " ").source_sha256 != c.source_sha256
    assert c.entry == "ModelNew" and c.dsl is None and c.metadata == {}


def test_problem_op_constructor():
    p = Problem.op("layernorm", rows=128, cols=64)
    assert p.kind == "reference_op"
    assert p.name == "layernorm"
    assert p.shape == {"rows": 128, "cols": 64}
    assert p.dtype is None
    p16 = Problem.op("matmul", dtype="float16")
    assert p16.dtype == "float16" and p16.shape == {}


def test_problem_op_rejects_bad_dtype():
    with pytest.raises(ValidationError):
        Problem.op("layernorm", dtype="float64")


def test_problem_file_constructor(tmp_path):
    path = tmp_path / "level1_1.py"
    p = Problem.file(path, dtype="bfloat16")
    assert p.kind == "kernelbench_file"
    assert p.name == str(path) and isinstance(p.name, str)
    assert p.shape == {} and p.dtype == "bfloat16"
    assert Problem.file("x.py").dtype is None


def test_candidate_carries_problem():
    c = Candidate(source="x = 1", problem=Problem.op("rowsum"))
    assert c.problem.name == "rowsum"
    back = Candidate.model_validate_json(c.model_dump_json())
    assert back == c


# --- extra fields ----------------------------------------------------------------------------


@pytest.mark.parametrize("build", [
    lambda: Candidate(source="x", colour="red"),
    lambda: Problem(kind="reference_op", name="layernorm", size=3),
    lambda: Failure(reason=Reason.crash, message="m", stage="load", extra=1),
    lambda: Measurement(unknown=True),
    lambda: Finding(code="c", kind="info", evidence="e", hint="h", severity=2),
])
def test_extra_fields_are_forbidden(build):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        build()


def test_extra_field_forbidden_in_verdict_json():
    data = _verdict().model_dump(mode="json")
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Verdict.model_validate(data)


def test_memory_budget_ratio_counts_only_what_the_judge_adds():
    from kernelgate.models import MemoryReport

    mib = 1 << 20
    memory = MemoryReport(footprint_bytes=100 * mib, judge_peak_bytes=700 * mib, reference_peak_bytes=150 * mib,
                          fixed_bytes=256 * mib)
    assert memory.gate_over_footprint() == pytest.approx((700 - 150 - 256) / 100)
    assert MemoryReport(footprint_bytes=100 * mib, judge_peak_bytes=300 * mib).gate_over_footprint() is None
    under = MemoryReport(footprint_bytes=mib, judge_peak_bytes=200 * mib, reference_peak_bytes=mib, fixed_bytes=256 * mib)
    assert under.gate_over_footprint() == 0.0
