"""The data kernelgate passes around: what goes in, what the worker measured, what comes out.

Inputs: ``Candidate`` (the source and its DSL) and ``Problem`` (which op, at which shape).
From the worker: ``Measurement`` (numerics, kernels and artifacts, timings, environment), plain
data that the parent validates. Out: ``Verdict``, whose ``status`` has one meaning everywhere
(see ``Status``) and which carries every piece of evidence it was decided on.
"""

from __future__ import annotations

import hashlib
from enum import Enum
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kernelgate._base import Model
from kernelgate.hardware import DeviceInfo, MathMode, Peaks

__all__ = [
    "Status",
    "Reason",
    "Candidate",
    "Problem",
    "Cost",
    "TrialResult",
    "NumericsReport",
    "KernelArtifact",
    "TimeStats",
    "TimingReport",
    "Environment",
    "Failure",
    "Measurement", "MemoryReport",
    "Finding",
    "Metrics",
    "Verdict",
]


class Status(str, Enum):
    """What the gate concluded about a candidate."""

    accept = "accept"
    """Correct, and flagged by neither screen: fast enough against the library and the roofline."""

    repair = "repair"
    """Correct but inefficient, for a reason a rewrite in the same DSL can fix (or unexplained)."""

    structural = "structural"
    """Correct, written well, still behind the library for code-generation or algorithm reasons."""

    reject = "reject"
    """Not usable: did not compile, crashed, hung, wrong numerics, or gamed the evaluation."""

    untimed = "untimed"
    """Correct as far as could be checked, no defect found, nothing timed: no efficiency claim."""


class Reason(str, Enum):
    """Why a candidate was rejected."""

    syntax_error = "syntax_error"
    """The source does not parse."""
    load_error = "load_error"
    """Importing the source failed (import error, exception at module level)."""
    missing_entry = "missing_entry"
    """The entry point (``ModelNew`` or the named function) is not in the source."""
    compile_error = "compile_error"
    """The DSL compiler rejected the kernel."""
    runtime_error = "runtime_error"
    """The candidate raised while running."""
    crash = "crash"
    """The worker process died (segfault, illegal address, ``os._exit``, out of memory)."""
    load_timeout = "load_timeout"
    """Loading or compiling did not finish in time."""
    run_timeout = "run_timeout"
    """Running the candidate did not finish in time (an endless loop on the host or the GPU)."""
    wrong_shape = "wrong_shape"
    """The output's shape differs from the reference's."""
    wrong_dtype = "wrong_dtype"
    """The output's dtype differs from the reference's."""
    wrong_output_type = "wrong_output_type"
    """The output is not a plain dense tensor."""
    nonfinite_output = "nonfinite_output"
    """NaN or Inf where the reference is finite (unwritten elements show as NaN: outputs are poisoned)."""
    numerics_mismatch = "numerics_mismatch"
    """The output differs from the reference beyond the tolerance."""
    trivial_output = "trivial_output"
    """All-zero or constant output where the reference is not."""
    no_kernel_launched = "no_kernel_launched"
    """No kernel of the candidate's DSL ran: the work was done some other way."""
    unsynchronized_work = "unsynchronized_work"
    """Wall-clock time under a device sync far exceeds the event time: work escaped the timer."""
    exceeds_roofline = "exceeds_roofline"
    """Faster than the physical floor allows, twice: the measurement is gamed or broken."""
    out_of_memory = "out_of_memory"
    """The candidate exhausted the worker's host or GPU memory limit."""
    tampering = "tampering"
    """The candidate patched timers, torch, the harness, ``sys.modules`` or process-wide math settings."""
    introspection = "introspection"
    """The candidate walked frames or the garbage collector's objects (where the reference output lives)."""
    library_op_used = "library_op_used"
    """A library op (torch, cuBLAS, cuDNN) did most of the work instead of the candidate's kernel."""
    side_stream = "side_stream"
    """The candidate ran work on a stream other than the one the gate times."""
    output_caching = "output_caching"
    """Outputs replayed from an earlier call (keyed by address or content), or a returned buffer reused."""
    input_mutation = "input_mutation"
    """The candidate changed its inputs."""
    host_work = "host_work"
    """The candidate's process spent far more CPU time per timed call than launching kernels takes:
    the work was done on the host (numpy, Python loops)."""
    background_work = "background_work"
    """Threads or deferred work still running, or outputs still changing, after the call returned."""
    forbidden_call = "forbidden_call"
    """A fork, a subprocess, or a write outside the worker's temp dir."""
    shape_specialized = "shape_specialized"
    """Correct only at the tested shape: wrong at a neighbouring shape, with a literal shape branch in the source."""
    recheck_mismatch = "recheck_mismatch"
    """Outputs rechecked after timing (or after many calls) are wrong: behaviour changed once timed."""
    timing_interference = "timing_interference"
    """The library was slower while the candidate's process lived than after it was gone: the
    candidate kept the GPU busy outside its own timed calls."""


class Candidate(Model):
    """A kernel to screen: its source and how to find its entry point."""

    source: str
    """The candidate's Python source (a Triton module, a KernelBench ``ModelNew`` file, ...)."""
    dsl: str | None = None
    """The DSL plug-in name (``triton``); detected from the source when None."""
    entry: str = "ModelNew"
    """A KernelBench-style ``nn.Module`` class (built with the problem's init inputs) or a function."""
    name: str | None = None
    """A display name, e.g. the file name."""
    problem: Problem | None = None
    """The op it replaces; ``screen(candidate, problem)`` may give it instead."""
    metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    """Free data from the caller (generator, sample id, prompt hash): kept on the verdict."""

    @property
    def source_sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


class Problem(Model):
    """The op a candidate replaces: a reference-op catalogue entry or a KernelBench-style file."""

    kind: Literal["reference_op", "kernelbench_file"]
    """Where the reference comes from."""
    name: str
    """Catalogue key (``layernorm``) or the path of a file with ``Model``, ``get_inputs``, ``get_init_inputs``."""
    shape: dict[str, int] = Field(default_factory=dict)
    """Overrides of the default shape parameters: a catalogue op's parameters (``{"rows": 4096}``)
    or a KernelBench file's integer globals (``{"batch_size": 16}``). Each is a size, at least 1."""
    dtype: Literal["float32", "float16", "bfloat16"] | None = None
    """The problem's dtype; None keeps the op's or file's own."""

    @field_validator("shape")
    @classmethod
    def _positive_sizes(cls, shape: dict[str, int]) -> dict[str, int]:
        # A size of 0 or less is bad input, not a fault of the candidate: refuse it here, by name.
        bad = [f"{k}={v}" for k, v in shape.items() if v < 1]
        if bad:
            raise ValueError(f"shape sizes must be integers >= 1, got {', '.join(bad)}")
        return shape

    @classmethod
    def op(cls, name: str, dtype: str | None = None, **shape: int) -> Problem:
        return cls(kind="reference_op", name=name, shape=shape, dtype=dtype)

    @classmethod
    def file(cls, path: str, dtype: str | None = None, shape: dict[str, int] | None = None) -> Problem:
        """A KernelBench-style file (a str or a path-like). A relative path is resolved against the
        current directory now, since the worker runs elsewhere. ``shape`` overrides the file's integer globals."""
        import os

        return cls(kind="kernelbench_file", name=os.path.abspath(os.fspath(path)), shape=dict(shape or {}),
                   dtype=dtype)


class Cost(Model):
    """The work a problem demands: the inputs to the roofline."""

    flops: float = Field(ge=0)
    """Algorithmic floating-point operations (a multiply-add counts 2)."""
    bytes_compulsory: float = Field(ge=0)
    """Each input and parameter read once, each output written once, in bytes."""
    math_mode: MathMode
    """The math mode the problem's dtype runs in on the library side (fp32 problems: fp32)."""
    peak_mode: MathMode
    """The fastest mode the dtype allows (TF32 for fp32 matmul-like ops): used by the physics check."""
    estimate: str
    """Where F and B come from: ``catalogue:<op>`` or ``generic:flop_counter+tensor_bytes``."""


class TrialResult(Model):
    """One numerics trial: fresh inputs from one distribution, candidate against fp64 and dtype references."""

    distribution: str
    """How the inputs were drawn (``uniform01``, ``normal``, ``signed_scaled``, ...)."""
    passed: bool
    """Within tolerance, finite, right shape and dtype, not trivial."""
    reason: Reason | None = None
    """Why it failed, when it did."""
    message: str | None = None
    """The evidence, in words."""
    max_abs_error: float | None = None
    """max |candidate - fp64 reference|."""
    normalized_error: float | None = None
    """max |c - r64| / (atol*rms(r64) + rtol*|r64|): <= 1 passes."""
    reference_normalized_error: float | None = None
    """The same measure for the library in the problem's dtype: how accurate the library itself is."""


class NumericsReport(Model):
    """The whole correctness check."""

    checked: bool
    """False when numerics could not be run here (problem too large for the interpreter)."""
    passed: bool
    """Every trial passed (False when not checked)."""
    skipped_reason: str | None = None
    """Why numerics were not run."""
    executor: Literal["gpu", "interpreter", "none"] = "none"
    """Where the candidate ran: on the GPU, in the Triton interpreter on the CPU, or not at all."""
    trials: list[TrialResult] = Field(default_factory=list)
    """One entry per trial."""
    state_copied: bool | None = None
    """The reference's (randomized) parameters were copied into the candidate; False: keys differ, seeded alike."""
    atol: float | None = None
    """Absolute tolerance, relative to the rms of the reference output."""
    rtol: float | None = None
    """Relative tolerance."""


class KernelArtifact(Model):
    """One compiled kernel the candidate launched, with what its compiler says about it."""

    name: str
    """The kernel's function name."""
    dsl: str
    """The plug-in that compiled it."""
    target: str
    """``cuda:90`` etc.: the GPU target it was compiled for."""
    launches: int = Field(ge=0)
    """How many times it was launched during one forward call."""
    num_warps: int | None = None
    num_stages: int | None = None
    shared_bytes: int | None = None
    """Static shared memory per block."""
    registers: int | None = None
    """Registers per thread (ptxas)."""
    spill_bytes: int | None = None
    """Spill stores + loads in bytes (ptxas)."""
    grid: list[int] | None = None
    """Grid of the first launch."""
    constexprs: dict[str, Any] = Field(default_factory=dict)
    """Compile-time constants of the first launch (block sizes...)."""
    asm: dict[str, str] = Field(default_factory=dict)
    """Artifacts by kind (``ttgir``, ``ptx``, ``sass``, ``cuda``), each truncated to a bounded size."""
    from_cache: bool = False
    """Its compiled code (or static artifacts) came from the compile cache: nothing was recompiled."""


class TimeStats(Model):
    """Repeated timings of one callable, in milliseconds."""

    median_ms: float = Field(ge=0)
    p20_ms: float = Field(ge=0)
    p80_ms: float = Field(ge=0)
    min_ms: float = Field(ge=0)
    reps: int = Field(ge=1)
    wall_median_ms: float = Field(ge=0)
    """Host wall-clock per call, from the start event to a device-wide sync: catches work on streams
    the events miss."""
    host_median_ms: float | None = None
    """Host time to enqueue one call (the wrapper's Python and launches), median; None in a report
    that does not record it."""
    host_late_reps: int | None = Field(default=None, ge=0)
    """Repetitions in which the host was still enqueueing the call when the GPU reached the start
    event, so the event time includes host work (``TimingReport.launch_window_ms`` was too short
    for this wrapper)."""
    samples_ms: list[float] = Field(default_factory=list)
    """Every event timing, in the order taken."""


class TimingReport(Model):
    """Candidate and library timed interleaved, on the same inputs: the library in the judge's
    process, the candidate in its own (its CUDA events), with the judge's clock around each call."""

    candidate: TimeStats
    library: TimeStats
    l2_flush_bytes: int = Field(ge=0)
    """Bytes written between repetitions to evict the L2."""
    input_sets: int = Field(ge=1)
    """Distinct input sets rotated through (fresh contents and addresses)."""
    rounds: int = Field(ge=1)
    """Timing rounds (a second one is taken before believing an impossible result)."""
    launch_overhead_ms: float = Field(ge=0)
    """The harness's own share of the candidate's wall time, subtracted before the wall is compared
    with its events: the median round trip of timed calls without forward at the same idle window,
    made in the candidate's process before the candidate was loaded (``Screen.calibrate``)."""
    launch_window_ms: float = Field(default=0.0, ge=0)
    """GPU idle time after each L2 flush, before the start event, for the host to enqueue the call."""
    stopped: Literal["converged", "max_reps", "max_seconds"] | None = None
    """Why the interleaved loop ended: ``converged`` (adaptive timing: both medians known to the
    asked precision, ``kernelgate.timing.enough_samples``), ``max_reps`` (the cap on repetitions) or
    ``max_seconds`` (the time budget). None in a report that does not record it. The
    repetitions taken are ``TimeStats.reps``."""
    wall_resolution_ms: float | None = None
    """The spread of the harness's own round trip (calibration, before the candidate was loaded):
    how finely the judge's clock can corroborate the candidate's events (``Policy.wall_resolution_multiple``)."""
    runner_median_ms: float | None = None
    """The candidate process's own account of its host time per timed request, less the window
    (diagnosis: the judge's wall less this is the pipe and the signals)."""
    library_alone_median_ms: float | None = None
    """The library timed again after the candidate's process was killed: a library much slower
    beside the candidate than alone means the candidate kept the GPU busy (``timing_interference``)."""
    candidate_cpu_ms: float | None = None
    """CPU time of the candidate's process group per timed request, less the harness's own per
    request (calibrated before the candidate was loaded), read by the judge from ``/proc``: host
    work the candidate did per call, whatever it reports (``host_work``)."""
    stream_calls: int | None = None
    """Calls in the judge-clocked stream: forward calls back to back on distinct fresh input sets,
    all enqueued behind a wait for the judge's word, the judge's clock from its store of the word
    to the end of the calls (``Screen._stream``, ``kernelgate/worker/gpu_gate.py``)."""
    stream_ms: float | None = None
    """The stream's time per call by the judge's clock, less the calibrated cost of an empty gated stream."""
    stream_cpu_ms: float | None = None
    """CPU time of the candidate's process group per call during the stream request (from ``/proc``)."""
    library_stream_ms: float | None = None
    """The library's time per call over the same input sets, back to back, gated the same way in the judge."""
    stream_overhead_ms: float | None = None
    """The calibrated cost of an empty gated stream (subtracted from ``stream_ms``)."""


class Environment(Model):
    """Where and with what the measurement was made."""

    device: DeviceInfo | None
    """The GPU, or None on a machine without one."""
    python: str
    torch: str
    dsl_versions: dict[str, str] = Field(default_factory=dict)
    """Versions of the DSL packages in use (``triton``: ``3.6.0``)."""
    allow_tf32_matmul: bool
    allow_tf32_cudnn: bool
    interpreter: bool = False
    """The candidate ran in the Triton interpreter (no GPU)."""


class Failure(Model):
    """A candidate-caused failure seen by the worker or the supervisor."""

    reason: Reason
    message: str
    """Trimmed, readable evidence: the compiler's message with candidate line numbers, the exception."""
    stage: str
    """Where it happened: load, numerics, timing, artifacts, supervisor."""


class KernelCounters(Model):
    """Nsight Compute's counters for one kernel of one call of the candidate."""

    name: str
    dram_bytes_read: float = Field(ge=0)
    dram_bytes_written: float = Field(ge=0)
    duration_ns: float | None = None


class NcuReport(Model):
    """The optional Nsight Compute pass (``ScreenOptions.ncu``, ``kernelgate.ncu``): one profiled call."""

    kernels: list[KernelCounters]
    command: str
    """The ncu command line (without the profiled process)."""

    @property
    def dram_bytes(self) -> float:
        """DRAM bytes read and written by all of the call's kernels."""
        return sum(k.dram_bytes_read + k.dram_bytes_written for k in self.kernels)


class MemoryReport(Model):
    """GPU memory of one screen, per process (``torch.cuda.max_memory_allocated``), against the problem's footprint."""

    footprint_bytes: int = Field(ge=0)
    """Inputs + output + parameters of the problem: one call's data."""
    judge_peak_bytes: int = Field(ge=0)
    """The judge's own peak: reference, expected outputs, input sets, pristine copies, checks."""
    judge_reserved_peak_bytes: int | None = None
    """The most the judge's caching allocator held from the device (``max_memory_reserved``):
    what the candidate's process could not have, freed blocks kept for reuse included."""
    candidate_peak_bytes: int | None = None
    """The candidate's process, as it reports it (its own allocations and its opened inputs)."""
    judge_peak_by_phase: dict[str, int] = Field(default_factory=dict)
    reference_peak_bytes: int | None = None
    """What the reference itself needs: its inputs and parameters plus the most its own call
    allocated (activations and output), measured around the judge's reference calls."""
    reference_fp64_peak_bytes: int | None = None
    """The most one fp64 reference call allocated at once (its fp64 inputs and state, activations and
    output), beyond what the judge held before it:
    part of the judge's peak, reported apart because it scales with the reference's activations,
    not with the footprint."""
    fixed_bytes: int = 0
    """The judge's buffers whose size does not depend on the problem (the L2 flush buffer)."""

    def gate_over_footprint(self) -> float | None:
        """The judge's memory beyond the reference's own and its fixed buffers, over the footprint
        (the memory budget: at most ``MEMORY_BUDGET_FACTOR``)."""
        if not self.footprint_bytes or self.reference_peak_bytes is None:
            return None
        extra = self.judge_peak_bytes - self.reference_peak_bytes - self.fixed_bytes
        return max(0.0, extra) / self.footprint_bytes


class Measurement(Model):
    """Everything the worker observed: plain data, validated by the parent."""

    failure: Failure | None = None
    numerics: NumericsReport | None = None
    kernels: list[KernelArtifact] = Field(default_factory=list)
    timing: TimingReport | None = None
    environment: Environment | None = None
    cost: Cost | None = None
    notes: list[str] = Field(default_factory=list)
    """Things the verdict must say (state not copied, numerics skipped, artifacts unavailable, ...)."""
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    """Wall-clock seconds per worker stage (load, numerics, artifacts, timing)."""
    memory: MemoryReport | None = None
    integrity: list[Finding] = Field(default_factory=list)
    """Static integrity evidence that did not reject on its own (``kernelgate.integrity``)."""
    runtime_findings: list[Finding] = Field(default_factory=list)
    """Defects seen while the candidate ran (``wrapper_copies``: data copied around the kernel)."""


class Finding(Model):
    """One thing the diagnosis noticed, with its evidence and what to do about it."""

    code: str
    """Stable identifier, e.g. ``serial_reduction``, ``tiny_block``, ``no_tensor_cores``, ``unexplained_gap``."""
    kind: Literal["repairable", "structural", "info"]
    """Whether a rewrite in the same DSL can fix it."""
    evidence: str
    """A line of the candidate or an artifact, or a number, that shows it."""
    hint: str
    """What to change."""
    kernel: str | None = None
    """Which kernel it concerns."""


class Metrics(Model):
    """The two screens and what they were computed from."""

    t_candidate_ms: float = Field(gt=0)
    t_library_ms: float = Field(gt=0)
    lre: float = Field(gt=0)
    """Library-relative efficiency t_library / t_candidate (> 1: faster than the library)."""
    lre_low: float = Field(gt=0)
    lre_high: float = Field(gt=0)
    """A 95% bootstrap interval of the LRE."""
    t_floor_ms: float = Field(gt=0)
    """max(F / P_peak, B / BW_peak, launch latency)."""
    u_candidate: float = Field(ge=0)
    """Roofline utilization t_floor / t_candidate, against the peak of the math mode in use."""
    u_library: float = Field(ge=0)
    u_physics: float = Field(ge=0)
    """t_floor at the fastest mode the dtype allows over t_candidate: > 1.1 is impossible."""
    bound: Literal["compute", "memory", "launch"]
    """Which term sets the floor."""
    flops: float = Field(ge=0)
    bytes_compulsory: float = Field(ge=0)
    peaks: Peaks
    """The ceilings used, with their source."""
    math_mode: MathMode
    dram_bytes: float | None = None
    """DRAM bytes the candidate's kernels moved in one call, counted by Nsight Compute
    (``ScreenOptions.ncu``); None when not measured."""


class Verdict(Model):
    """The gate's answer for one candidate: a status with one meaning, and its evidence."""

    status: Status
    reason: Reason | None = None
    """Set for ``reject`` only."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How sure the gate is of the status (low when an interval straddles a threshold or a gap is unexplained)."""
    summary: str
    """One line for people."""
    feedback: str
    """A short, actionable text to put in the next prompt of a generator."""
    candidate_name: str | None = None
    candidate_sha256: str
    dsl: str | None = None
    problem: Problem
    candidate_metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    metrics: Metrics | None = None
    """Both screens; None when nothing was timed."""
    findings: list[Finding] = Field(default_factory=list)
    numerics: NumericsReport | None = None
    failure: Failure | None = None
    kernels: list[KernelArtifact] = Field(default_factory=list)
    timing: TimingReport | None = None
    ncu: NcuReport | None = None
    memory: MemoryReport | None = None
    """GPU memory the judge and the candidate's process took, against the problem's footprint."""
    """Nsight Compute's per-kernel counters, when the optional pass ran (``ScreenOptions.ncu``)."""
    cost: Cost | None = None
    environment: Environment | None = None
    notes: list[str] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict)
    """Seconds per stage of this screen (worker start, load, numerics, timing, total)."""
    kernelgate_version: str

    @model_validator(mode="after")
    def _status_has_its_evidence(self) -> Verdict:
        timed = {Status.accept, Status.repair, Status.structural}
        if self.status is Status.reject and self.reason is None:
            raise ValueError("a reject verdict needs a reason")
        if self.status is not Status.reject and self.reason is not None:
            raise ValueError(f"a {self.status.value} verdict carries no reject reason")
        if self.status in timed and self.metrics is None and not self.findings:
            raise ValueError(f"a {self.status.value} verdict needs timing metrics or findings")
        if self.status is Status.accept and self.metrics is None:
            raise ValueError("an accept verdict needs timing metrics")
        if self.status is Status.untimed and self.metrics is not None:
            raise ValueError("an untimed verdict carries no timing metrics")
        if self.status in {Status.accept, Status.structural} and not (self.numerics and self.numerics.passed):
            raise ValueError(f"a {self.status.value} verdict needs passed numerics")
        return self


Candidate.model_rebuild()
Measurement.model_rebuild()
