"""``screen``: the whole pipeline, in the order the data flows.

    Candidate ─> worker process: load/compile ─> numerics ─> artifacts ─> timing ─> Measurement
    Measurement + cost (F, B) + device peaks ─> roofline metrics ─> diagnosis ─> policy ─> Verdict
    (optional, ScreenOptions.ncu: one more process under Nsight Compute ─> DRAM bytes moved, as evidence)
"""

from __future__ import annotations

import time
from typing import Protocol

from kernelgate import __version__, integrity, ncu, roofline
from kernelgate.diagnosis import diagnose
from kernelgate.dsl import detect_dsl, get_plugin, plugins
from kernelgate.feedback import write_feedback, write_summary
from kernelgate.hardware import peaks_for
from kernelgate.models import (Candidate, Failure, Finding, Measurement, Metrics, NcuReport, Problem, Reason,
                               Status, Verdict)
from kernelgate.policy import DEFAULT_POLICY, Policy, StreamClock, decide
from kernelgate.stats import lre_interval
from kernelgate.worker import Job, ScreenOptions, WorkerResult, default_pool

__all__ = ["screen", "metrics_of", "JobRunner"]


class JobRunner(Protocol):
    """Anything that runs a job in isolation: a ``WorkerPool``, a ``Worker``, or a test double."""

    def run(self, job: Job) -> WorkerResult: ...


def screen(candidate: Candidate, problem: Problem | None = None, *, policy: Policy = DEFAULT_POLICY,
           options: ScreenOptions | None = None, runner: JobRunner | None = None) -> Verdict:
    """Screen one candidate against its problem's library op and return the verdict.

    A bad candidate never raises. Raises ``ProblemError`` for a problem that cannot be built,
    ``PluginError`` for an unknown DSL, ``WorkerError`` if the worker machinery itself fails.
    """
    started = time.perf_counter()
    problem = problem or candidate.problem
    if problem is None:
        raise ValueError("screen() needs a problem: pass one or set Candidate.problem")
    dsl = candidate.dsl or detect_dsl(candidate.source)
    if dsl is not None:
        get_plugin(dsl)  # an unknown DSL is the caller's mistake: PluginError, before any process starts
    failure = _unparsable(candidate.source)  # costs no process
    hits = integrity.scan(candidate.source)
    failure = failure or integrity.static_failure(hits)  # a rule that rejects alone: patched timers, frame walks...
    if failure is None and dsl is None:
        failure = Failure(reason=Reason.no_kernel_launched, stage="load",
                          message="the source imports no supported kernel DSL (" + ", ".join(plugins()) + ")")
    if failure is not None:
        measurement = Measurement(failure=failure, integrity=integrity.evidence_findings(hits))
        return _verdict(candidate, problem, dsl, measurement, policy, started, {})
    candidate = candidate.model_copy(update={"dsl": dsl})
    options = options or ScreenOptions()
    if options.physics_limit > policy.u_impossible:  # retime wherever the policy would reject
        options = options.model_copy(update={"physics_limit": policy.u_impossible})
    job = Job(candidate=candidate, problem=problem, options=options)
    result = (runner or default_pool()).run(job)
    counters = _ncu_pass(job, result.measurement) if options.ncu else None
    return _verdict(candidate, problem, dsl, result.measurement, policy, started, result.seconds, counters)


def _ncu_pass(job: Job, m: Measurement) -> NcuReport | None:
    """The optional Nsight Compute pass, for a candidate that was timed; why not, as a note."""
    if m.failure is not None:
        return None
    if m.timing is None:
        m.notes.append("ncu pass skipped: nothing was timed")
        return None
    began = time.perf_counter()
    report, why = ncu.profile(job)
    m.stage_seconds["ncu"] = round(time.perf_counter() - began, 4)
    if why:
        m.notes.append(why)
    return report


def _unparsable(source: str) -> Failure | None:
    """A syntax error, found without running anything."""
    try:
        with integrity.PARSE_LOCK:
            compile(source, "candidate.py", "exec")
    except SyntaxError as exc:
        return Failure(reason=Reason.syntax_error, stage="load",
                       message=f"line {exc.lineno}: {(exc.text or '').strip()}\nSyntaxError: {exc.msg}")
    except ValueError as exc:  # NUL bytes
        return Failure(reason=Reason.syntax_error, stage="load", message=str(exc))
    return None


def metrics_of(m: Measurement) -> Metrics | None:
    """Both screens from a measurement that has timings, a cost and a known device."""
    if m.timing is None or m.cost is None or m.environment is None or m.environment.device is None:
        return None
    peaks = peaks_for(m.environment.device)
    cost, t = m.cost, m.timing
    floor = roofline.t_floor_ms(cost.flops, cost.bytes_compulsory, peaks, cost.math_mode)
    floor_physics = roofline.t_floor_ms(cost.flops, cost.bytes_compulsory, peaks, cost.peak_mode)
    estimate, low, high = lre_interval(t.library.samples_ms, t.candidate.samples_ms)
    return Metrics(
        t_candidate_ms=t.candidate.median_ms, t_library_ms=t.library.median_ms,
        lre=estimate, lre_low=low, lre_high=high, t_floor_ms=floor,
        u_candidate=roofline.utilization(floor, t.candidate.median_ms),
        u_library=roofline.utilization(floor, t.library.median_ms),
        u_physics=roofline.utilization(floor_physics, t.candidate.median_ms),
        bound=roofline.bound(cost.flops, cost.bytes_compulsory, peaks, cost.math_mode),
        flops=cost.flops, bytes_compulsory=cost.bytes_compulsory, peaks=peaks, math_mode=cost.math_mode)


def _verdict(candidate: Candidate, problem: Problem, dsl: str | None, m: Measurement, policy: Policy,
             started: float, seconds: dict[str, float], counters: NcuReport | None = None) -> Verdict:
    sm_count = m.environment.device.sm_count if m.environment and m.environment.device else None
    findings = diagnose(m.kernels, m.cost, sm_count) + list(m.runtime_findings) + list(m.integrity)
    metrics = metrics_of(m) if m.failure is None else None
    message = None
    if m.failure is not None:
        status, reason, confidence = Status.reject, m.failure.reason, 0.95
    else:
        wall_excess, resolution, stream = 0.0, 0.0, None
        t = m.timing
        if t is not None:
            wall_excess = max(0.0, t.candidate.wall_median_ms - t.launch_overhead_ms)
            resolution = t.wall_resolution_ms or 0.0
            stream = StreamClock.of(t)
        checked = bool(m.numerics and m.numerics.checked)
        decision = decide(metrics, findings, numerics_checked=checked, wall_excess_ms=wall_excess, policy=policy,
                          wall_resolution_ms=resolution, stream=stream)
        status, reason, confidence = decision.status, decision.reason, decision.confidence
        findings, message = decision.findings, decision.message
    if counters is not None and metrics is not None:
        metrics = metrics.model_copy(update={"dram_bytes": counters.dram_bytes})
        findings = findings + [_dram_traffic(counters, metrics)]
    if status is Status.reject and m.failure is None:
        m.failure = Failure(reason=reason, message=message or reason.value, stage="policy")
    seconds = {**m.stage_seconds, **seconds, "total": round(time.perf_counter() - started, 4)}
    return Verdict(
        status=status, reason=reason, confidence=confidence,
        summary=write_summary(status, reason, metrics, candidate.name),
        feedback=write_feedback(status, reason, m.failure, metrics, findings, message),
        candidate_name=candidate.name, candidate_sha256=candidate.source_sha256, dsl=dsl, problem=problem,
        candidate_metadata=candidate.metadata, metrics=metrics if status is not Status.untimed else None,
        findings=findings, numerics=m.numerics, failure=m.failure,
        kernels=[k.model_copy(update={"asm": {}}) for k in m.kernels],  # IR text stays out of verdict logs
        timing=m.timing, ncu=counters,
        cost=m.cost, memory=m.memory, environment=m.environment, notes=m.notes, seconds=seconds, kernelgate_version=__version__)


def _dram_traffic(counters: NcuReport, metrics: Metrics) -> Finding:
    """Evidence only (the policy does not read it): DRAM traffic against the compulsory bytes."""
    ratio = counters.dram_bytes / metrics.bytes_compulsory if metrics.bytes_compulsory else float("inf")
    names = ", ".join(dict.fromkeys(k.name for k in counters.kernels))[:200]
    return Finding(code="dram_traffic", kind="info",
                   evidence=(f"Nsight Compute: {counters.dram_bytes / 1e6:,.1f} MB of DRAM traffic in one call, "
                             f"{ratio:.2f}x the compulsory {metrics.bytes_compulsory / 1e6:,.1f} MB ({names})"),
                   hint="traffic well above the compulsory bytes means operands are read more than once: keep "
                        "them in shared memory or registers across their uses, or fuse the passes")
