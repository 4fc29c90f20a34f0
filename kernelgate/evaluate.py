"""The worker's side of a screen: load, check numerics, collect artifacts, time. Runs in the child.

Each stage adds to one ``Measurement``; ``emit`` sends it to the parent after every stage, so a
crash in a later stage never loses what an earlier one found. A candidate-caused failure ends the
run with ``Measurement.failure`` set; nothing here raises on a bad candidate.

Integrity (``kernelgate.integrity``) runs through every stage: static rules before the import,
the runtime guard armed before it and checked after every call into candidate code, the torch-op
recorder on the first trial, then the history probes (same addresses with new contents, same
contents at new addresses, earlier outputs unchanged, nothing still running after a delay,
outputs rechecked after many calls), a neighbouring shape where the source branches on a literal
shape, and on a GPU the profiler's kernel names and a recheck of what was timed.

The input seed is a local of ``evaluate``: the generator is passed down, never stored in a
module global, the problem is built from a second, unrelated seed, and torch's global generator is
reseeded afterwards, so ``torch.initial_seed()`` tells the candidate nothing about its inputs.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, NamedTuple

import torch

from kernelgate import compile_cache, integrity, roofline
from kernelgate.dsl import get_plugin
from kernelgate.errors import ProblemError
from kernelgate.hardware import detect, peaks_for
from kernelgate.models import Environment, Failure, Finding, Measurement, NumericsReport, Reason, TrialResult
from kernelgate.models import Problem
from kernelgate.numerics import changed_inputs, check_trial_output, compare, poisoned_allocations, same_values
from kernelgate.problems import DISTRIBUTIONS, BuiltProblem, build_problem, randomize_state
from kernelgate.timing import time_pair

__all__ = ["evaluate", "CandidateFailure"]


class CandidateFailure(Exception):
    """Raised inside the worker to end the run with a reject reason."""

    def __init__(self, reason: Reason, message: str, stage: str) -> None:
        super().__init__(message)
        self.failure = Failure(reason=reason, message=message, stage=stage)


def _environment(plugin, interpret: bool) -> Environment:
    return Environment(
        device=detect(), python=sys.version.split()[0], torch=torch.__version__,
        dsl_versions=plugin.versions(),
        allow_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
        allow_tf32_cudnn=bool(torch.backends.cudnn.allow_tf32), interpreter=interpret)


def describe_exception(exc: BaseException, source_path: Path) -> str:
    """The exception with only the candidate's own frames, as 'line N: code'."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(source_path)]
    lines = [f"line {f.lineno}: {(f.line or linecache.getline(f.filename, f.lineno)).strip()}" for f in frames[-5:]]
    message = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, SyntaxError) and exc.lineno:
        lines = [f"line {exc.lineno}: {(exc.text or '').strip()}"]
        message = f"SyntaxError: {exc.msg}"
    return "\n".join(lines + [message[:2000]])


_OOM_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory", "memoryerror")


class CandidateExit(Exception):
    """The candidate raised SystemExit, KeyboardInterrupt or GeneratorExit: a reject, not an exit."""


def _shielded(fn: Callable) -> Callable:
    """``fn`` with exits turned into an ordinary exception (the worker does not leave with it)."""

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            raise CandidateExit(f"the candidate raised {type(exc).__name__}({exc!s:.100}) while running") from exc

    return call


def _classify(plugin, exc: BaseException, source_path: Path, default: Reason, stage: str) -> CandidateFailure:
    if isinstance(exc, CandidateFailure):
        return exc
    guard = integrity.Guard._current
    if guard is not None and guard.violations:  # the guard refused a call: that is the reason, not the error it raised
        reason, message = guard.violations[0]
        evidence = integrity.evidence_for(getattr(guard, "static_hits", []), reason)
        return CandidateFailure(reason, f"{message} (then: {type(exc).__name__}: {str(exc)[:200]}){evidence}", stage)
    mapped = plugin.classify_error(exc)
    if mapped is not None:
        return CandidateFailure(mapped[0], mapped[1], stage)
    text = describe_exception(exc, source_path)
    if isinstance(exc, MemoryError) or any(t in text.lower() for t in _OOM_TEXTS):
        return CandidateFailure(Reason.out_of_memory, "out of memory: " + text, stage)
    return CandidateFailure(default, text, stage)


def _load_candidate(plugin, source: str, entry: str, workdir: Path):
    path = workdir / "candidate.py"
    path.write_text(source)
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise CandidateFailure(Reason.syntax_error, describe_exception(exc, path), "load") from None
    spec = importlib.util.spec_from_file_location("kernelgate_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
        raise CandidateFailure(Reason.load_error, f"the candidate raised {type(exc).__name__}({exc!s:.100}) at "
                               "import", "load") from None
    except CandidateFailure:
        raise
    except Exception as exc:
        raise _classify(plugin, exc, path, Reason.load_error, "load") from None
    if not hasattr(module, entry):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                         and getattr(v, "__module__", None) == spec.name)
        raise CandidateFailure(Reason.missing_entry, f"no {entry!r} in the candidate; it defines: "
                               f"{', '.join(defined) or 'nothing callable'}", "load")
    return path, getattr(module, entry)


def _use_compile_cache(opts, workdir: Path) -> None:
    """Point every compiler of this process at the shared cache, or at private directories."""
    if opts.compile_cache:
        compile_cache.activate(opts.compile_cache_dir)
    else:
        compile_cache.activate(None)
        os.environ["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
        os.environ["TILELANG_CACHE_DIR"] = str(workdir / "tilelang-cache")


def _too_big_for_interpreter(inputs: list, limit: int) -> int | None:
    elements = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
    return elements if elements > limit else None


class _Checks:
    """The integrity state of one run: static hits, the runtime guard, the DSL's launch log."""

    def __init__(self, hits: list, guard: integrity.Guard, log) -> None:
        self.hits, self.guard, self.log = hits, guard, log
        self.per_call: dict[str, int] | None = None
        """Launches per kernel of one settled forward call (the last numerics trial)."""

    def fail(self, reason: Reason, message: str, stage: str) -> CandidateFailure:
        return CandidateFailure(reason, message + integrity.evidence_for(self.hits, reason), stage)

    def after_call(self, when: str, stage: str) -> None:
        found = self.guard.check(when)
        if found is not None:
            raise self.fail(found[0], found[1], stage)
        if torch.cuda.is_initialized() and torch.cuda.current_stream() != torch.cuda.default_stream():
            raise self.fail(Reason.side_stream, f"the current CUDA stream is not the default stream {when}", stage)

    def launches(self, label: str, stage: str) -> None:
        """The call just made launched the same kernels as a settled call, as often."""
        counts = dict(self.log.counts)
        if self.per_call is not None and counts != self.per_call:
            raise self.fail(Reason.output_caching, f"{label} launched {counts or 'no kernel'}, a settled call "
                            f"{self.per_call}: a result was replayed or work skipped", stage)


def evaluate(job, workdir: Path, emit: Callable[[str, Measurement | None], None],
             wait_for_go: Callable[[], None] = lambda: None) -> Measurement:
    """Run every worker stage for one job; ``emit(phase, partial)`` reports progress.

    ``wait_for_go`` blocks at the start of the numerics, between their parts, and at the start of
    the timing until the supervisor says the GPU may be used (a concurrent lane gives numerics a
    shared turn, timing an exclusive one).
    """
    opts = job.options
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    interpret = not cuda
    plugin = get_plugin(job.candidate.dsl)
    _use_compile_cache(opts, workdir)
    log = plugin.prepare(interpret=interpret)
    m = Measurement(environment=_environment(plugin, interpret))
    hits = integrity.scan(job.candidate.source)
    m.integrity = integrity.evidence_findings(hits)
    gen = torch.Generator(device=device)
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)  # the input seed lives only in gen
    clock = time.perf_counter()

    part_clock = clock

    def stage_done(name: str) -> None:
        nonlocal clock, part_clock
        now = time.perf_counter()
        m.stage_seconds[name] = round(now - clock, 4)
        clock = part_clock = now

    def part_done(name: str) -> None:  # a part of the current stage, reported beside it
        nonlocal part_clock
        now = time.perf_counter()
        m.stage_seconds[name] = round(now - part_clock, 4)
        part_clock = now

    def checkpoint() -> None:
        """Between the numerics' parts: say ``run`` again and wait for the go-ahead (a concurrent
        lane lets a waiting timing in here); the wait counts in no stage."""
        nonlocal clock, part_clock
        began = time.perf_counter()
        emit("run", m)
        wait_for_go()
        waited = time.perf_counter() - began
        clock, part_clock = clock + waited, part_clock + waited

    try:
        emit("load", None)
        static = integrity.static_failure(hits)
        if static is not None:
            raise CandidateFailure(static.reason, static.message, static.stage)
        problem = build_problem(job.problem, device, int.from_bytes(os.urandom(4), "little"))  # ProblemError: the caller's
        torch.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        log.problem_dtype = str(problem.dtype).removeprefix("torch.")
        guard = integrity.Guard(workdir, workdir / "candidate.py", _allowed_write_dirs(opts))
        guard.static_hits = hits
        guard.arm()
        checks = _Checks(hits, guard, log)
        path, entry = _load_candidate(plugin, job.candidate.source, job.candidate.entry, workdir)
        checks.after_call("after the import", "load")
        if isinstance(problem.reference, torch.nn.Module):  # its state is copied into the candidate next
            randomize_state(problem.reference, gen)
        try:
            candidate, copied, note = problem.build_candidate(_shielded(entry) if not isinstance(entry, type) else entry)
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            raise CandidateFailure(Reason.runtime_error, f"the candidate raised {type(exc).__name__} while being "
                                   "constructed", "load") from None
        except Exception as exc:
            raise _classify(plugin, exc, path, Reason.runtime_error, "load") from None
        checks.after_call("after construction", "load")
        if isinstance(candidate, torch.nn.Module):
            candidate = _shielded(candidate)
        if note:
            m.notes.append(note)
        stage_done("load")
        emit("run", m)
        wait_for_go()
        clock = part_clock = time.perf_counter()  # the wait for a turn is the supervisor's to report, not a stage's
        m.numerics = NumericsReport(checked=False, passed=False, state_copied=copied,
                                    executor="interpreter" if interpret else "gpu",
                                    atol=problem.numerics_tolerance.atol, rtol=problem.numerics_tolerance.rtol)
        try:
            _check_numerics(m, problem, candidate, plugin, log, path, gen, opts, interpret, checks)
            part_done("trials")
            if m.numerics.passed:
                checkpoint()
                _probe_history(m, problem, candidate, plugin, path, gen, opts, checks, rechecks=not cuda)
                _probe_shape(m, job.problem, problem, candidate, plugin, path, gen, checks)
                part_done("probes")
                if cuda:
                    checkpoint()
                    _gpu_library_share(m, problem, candidate, gen, checks)
                    part_done("kernel_profile")
                    # still in a shared turn: the timing's inputs and expected outputs are made
                    # here, so the exclusive turn holds only the timed calls and their checks
                    timing_inputs = _timing_inputs(problem, gen, opts.timing_input_sets)
                    part_done("timing_inputs")
        except CandidateFailure as failure:
            if interpret and failure.failure.reason is Reason.runtime_error:
                # the interpreter runs code the compiler would refuse: ask the compiler
                emit("artifacts", m)
                plugin.artifacts(log, path, interpret=True)
                if log.compile_errors:
                    raise CandidateFailure(Reason.compile_error, log.compile_errors[0], "load") from None
            raise
        stage_done("numerics")
        m.stage_seconds["compile"] = round(sum(log.first_call_seconds.values()), 4)  # part of numerics
        emit("artifacts", m)
        kernels, notes = plugin.artifacts(log, path, interpret=interpret)
        m.kernels, m.notes = kernels, m.notes + notes
        if log.compile_errors:
            raise CandidateFailure(Reason.compile_error, log.compile_errors[0], "artifacts")
        checks.after_call("after the artifacts", "artifacts")
        stage_done("artifacts")
        if cuda and m.numerics.passed:
            emit("timing", m)
            wait_for_go()
            clock = time.perf_counter()
            _time(m, problem, candidate, timing_inputs, opts, checks)
            stage_done("timing")
        elif not cuda:
            m.notes.append("no GPU on this machine: nothing was timed")
        checks.after_call("before the result was sent", "result")
    except CandidateFailure as failure:
        m.failure = failure.failure
    return m


def _allowed_write_dirs(opts) -> list[str]:
    """Where code running on the candidate's behalf may write besides its temp dir: the compile caches."""
    dirs = [os.environ.get("TRITON_CACHE_DIR", ""), os.environ.get("TILELANG_CACHE_DIR", "")]
    if opts.compile_cache:
        dirs.append(opts.compile_cache_dir)
    return [d for d in dirs if d]


def _check_numerics(m: Measurement, problem: BuiltProblem, candidate, plugin, log, path: Path,
                    gen: torch.Generator, opts, interpret: bool, checks: _Checks) -> None:
    reference64 = problem.reference_fp64()
    alive: list = []  # every trial's buffers stay allocated: each trial gets addresses no earlier one had
    for index, distribution in enumerate(DISTRIBUTIONS[: opts.numerics_trials]):
        inputs = _inputs(problem, distribution, gen)
        alive.append(inputs)
        if index == 0 and interpret and not getattr(plugin, "cpu_numerics", True):
            _static_only(m, problem, candidate, log, inputs, path, plugin,
                         f"{plugin.name} kernels cannot run without a GPU: numerics not checked, static checks only")
            return
        if index == 0 and interpret and (count := _too_big_for_interpreter(inputs, opts.interpreter_max_elements)):
            _static_only(m, problem, candidate, log, inputs, path, plugin,
                         f"problem too large for the Triton interpreter ({count:,} input elements > "
                         f"{opts.interpreter_max_elements:,}): numerics not checked, static checks only; "
                         "screen a smaller shape or on a GPU")
            return
        log.reset()
        recorder = integrity.OpRecorder() if index == 0 else None
        try:
            result, ref = compare(distribution, candidate, problem.reference, reference64, inputs, problem.dtype,
                                  tol=problem.numerics_tolerance,
                                  after_call=lambda: checks.after_call(f"after trial {index + 1}", "numerics"),
                                  recorder=recorder, keep_alive=alive)
        except CandidateFailure:
            raise
        except Exception as exc:
            raise _classify(plugin, exc, path, Reason.runtime_error, "numerics") from None
        if index == 0:
            if log.total() == 0:
                raise CandidateFailure(Reason.no_kernel_launched, f"forward launched no {plugin.name} kernel: the "
                                       "output was computed some other way", "numerics")
            largest = max((t.numel() for t in inputs if isinstance(t, torch.Tensor)), default=0)
            heavy = integrity.heavy_ops(recorder.calls, largest)
            if heavy:
                raise checks.fail(Reason.library_op_used, "forward called torch on operands as large as the "
                                  f"problem's input ({largest:,} elements): {', '.join(heavy[:4])}", "numerics")
            copies = integrity.large_copies(recorder.copies, largest)
            if copies:
                m.runtime_findings.append(Finding(
                    code="wrapper_copies", kind="repairable",
                    evidence=f"forward copies data around its kernel (inputs of up to {largest:,} elements): "
                             + ", ".join(copies[:4]),
                    hint="read the input in its own layout and dtype inside the kernel (strides, a cast on load) "
                         "instead of .contiguous() / .float() / .to() in forward: each copy is another pass over memory"))
            m.cost = problem.cost(inputs, ref)
        checks.per_call = dict(log.counts)
        if not torch.isfinite(ref).any():
            m.notes.append(f"trial {distribution}: the reference is not finite on these inputs; trial skipped")
            continue
        m.numerics.trials.append(result)
        if not result.passed:
            m.numerics.checked = True
            raise CandidateFailure(result.reason, f"trial {index + 1} ({distribution}): {result.message}", "numerics")
    m.numerics.checked = True
    m.numerics.passed = bool(m.numerics.trials)


def _inputs(problem: BuiltProblem, distribution: str, gen: torch.Generator) -> list:
    """Fresh inputs; failing to make them is the problem's fault (too large for this machine), not the candidate's."""
    try:
        return problem.make_inputs(distribution, gen)
    except (RuntimeError, MemoryError) as exc:
        raise ProblemError(f"the problem's inputs could not be made: {type(exc).__name__}: {str(exc)[:300]}") from exc


def _expected(problem: BuiltProblem, inputs: list) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's output in the problem's dtype and in fp64, from copies of ``inputs``."""
    reference64 = problem.reference_fp64()
    with torch.no_grad():
        ref = problem.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        ref64 = reference64(*[(x.double() if x.is_floating_point() else x.clone()) if isinstance(x, torch.Tensor)
                              else x for x in inputs])
    return ref, ref64.double()


def _probe_history(m: Measurement, problem: BuiltProblem, candidate, plugin, path: Path, gen: torch.Generator,
                   opts, checks: _Checks, rechecks: bool) -> None:
    """Catch results that depend on call history rather than on the inputs.

    1. a call; 2. its inputs refilled in place (same addresses, new contents): a cache keyed by
    pointer returns the stale result; 3. identical contents at new addresses: every call must
    launch the same kernels, and its output must not be an earlier call's buffer; 4. the first
    output must not have changed; 5. after a short delay the last output must still be the same
    (nothing finishing in the background); 6. without a GPU (no timing loop), more calls over
    rotating input sets, then the last output of each set is rechecked.
    """
    tol = problem.numerics_tolerance

    def run(inputs: list, label: str) -> torch.Tensor:
        checks.log.reset()
        try:
            with torch.no_grad(), poisoned_allocations():
                out = candidate(*inputs)
                _sync()
        except CandidateFailure:
            raise
        except Exception as exc:
            raise _classify(plugin, exc, path, Reason.runtime_error, "probes") from None
        checks.after_call(f"after {label}", "probes")
        checks.launches(label, "probes")
        return out

    def verify(out, inputs: list, label: str, reason: Reason, why: str) -> None:
        ref, ref64 = _expected(problem, inputs)
        result = check_trial_output(label, out, ref, ref64, tol)
        if not result.passed:
            raise checks.fail(reason, f"{why}: {result.message}", "probes")

    first = _inputs(problem, "normal", gen)
    pristine = [x.clone() if isinstance(x, torch.Tensor) else x for x in first]
    out_a = run(first, "the first probe call")
    verify(out_a, pristine, "probe", Reason.recheck_mismatch, "a call after the numerics trials is wrong")
    snap_a = out_a.clone()
    refill = _inputs(problem, "uniform_signed", gen)
    with torch.no_grad():
        for target, fresh in zip(first, refill):
            if isinstance(target, torch.Tensor) and target.is_floating_point():
                target.copy_(fresh)
    out_b = run(first, "a call on the same input buffers refilled with new values")
    verify(out_b, first, "refill", Reason.output_caching,
           "same input addresses, new contents: the output matches the old contents or is stale")
    moved = [x.clone() if isinstance(x, torch.Tensor) else x for x in first]
    out_c = run(moved, "a call on identical values at new addresses")
    verify(out_c, moved, "moved", Reason.output_caching, "identical contents at new addresses")
    for earlier, label in ((out_a, "first"), (out_b, "second")):
        if isinstance(earlier, torch.Tensor) and earlier.numel() and out_c.data_ptr() == earlier.data_ptr():
            raise checks.fail(Reason.output_caching, f"the third call returned the {label} call's output buffer "
                              "while that output was still alive: a replayed result", "probes")
    if not same_values(out_a, snap_a):
        raise checks.fail(Reason.output_caching, "the first call's output changed when the candidate was called "
                          "again: it returns a buffer it reuses", "probes")
    snap_c = out_c.clone()
    time.sleep(opts.settle_delay_s)
    _sync()
    checks.after_call("after a delay", "probes")
    if not same_values(out_c, snap_c):
        raise checks.fail(Reason.background_work, f"the output changed {opts.settle_delay_s:g} s after the call "
                          "returned: work continued in the background", "probes")
    if not rechecks:
        return
    sets = [_inputs(problem, name, gen) for name in ("normal", "uniform01", "normal_offset")]
    kept: dict[int, torch.Tensor] = {}
    for call in range(opts.recheck_calls):
        kept[call % len(sets)] = run(sets[call % len(sets)], f"repeated call {call + 1}")
    for index, out in kept.items():
        verify(out, sets[index], "recheck", Reason.recheck_mismatch,
               f"after {opts.recheck_calls} more calls, the output on input set {index + 1} is wrong")


def _probe_shape(m: Measurement, spec: Problem, problem: BuiltProblem, candidate, plugin, path: Path,
                 gen: torch.Generator, checks: _Checks) -> None:
    """Where the source branches on a literal shape, one trial at a neighbouring shape (catalogue ops)."""
    literal = [h for h in checks.hits if h.rule == "shape_literal"]
    if not literal:
        return
    if spec.kind != "reference_op":
        m.notes.append("the source branches on a literal shape; a neighbouring shape is tried for catalogue ops only")
        return
    from kernelgate.reference_ops import get_op

    try:
        shape = get_op(spec.name).shape(spec.shape)
        neighbour_spec = spec.model_copy(update={"shape": {k: v + 1 for k, v in shape.items()}})
        neighbour = build_problem(neighbour_spec, problem.device, int.from_bytes(os.urandom(4), "little"))
        inputs = _inputs(neighbour, "normal", gen)
    except Exception as exc:
        m.notes.append(f"neighbouring shape not built ({type(exc).__name__}); shape specialization not checked")
        return
    label = ", ".join(f"{k}={v}" for k, v in neighbour_spec.shape.items())
    checks.log.reset()
    try:
        result, _ = compare("normal", candidate, neighbour.reference, neighbour.reference_fp64(), inputs,
                            neighbour.dtype, tol=neighbour.numerics_tolerance,
                            after_call=lambda: checks.after_call("at a neighbouring shape", "probes"))
    except CandidateFailure:
        raise
    except Exception as exc:
        message = describe_exception(exc, path).splitlines()[-1]
        raise checks.fail(Reason.shape_specialized, f"at the neighbouring shape {label} the candidate raised "
                          f"{message}", "probes") from None
    if not result.passed:
        raise checks.fail(Reason.shape_specialized, f"at the neighbouring shape {label}: {result.message}", "probes")
    m.notes.append(f"the source branches on a literal shape; it is also correct at {label}")


def _gpu_library_share(m: Measurement, problem: BuiltProblem, candidate, gen: torch.Generator, checks: _Checks) -> None:
    """The profiler's view of one call: most device time in kernels that are not the candidate's."""
    inputs = _inputs(problem, "normal", gen)
    names = list(checks.log.counts.keys() or checks.log.first.keys())
    checks.log.reset()  # the artifacts report the launches of this one call
    try:
        found = integrity.gpu_kernel_share(candidate, inputs, names)
    except Exception as exc:  # the profiler is evidence, not a requirement
        m.notes.append(f"kernel profile unavailable: {type(exc).__name__}: {str(exc)[:200]}")
        return
    checks.after_call("after the kernel profile", "probes")
    if found is None:
        return
    share, top = found
    if share > 0.5:
        raise checks.fail(Reason.library_op_used, f"{share:.0%} of the device time of one call was in kernels that are "
                          f"not the candidate's: {', '.join(top)}", "probes")


def _static_only(m, problem, candidate, log, inputs, path, plugin, why: str) -> None:
    """Nothing can execute here: run forward with kernels recorded but not executed, for artifacts."""
    m.numerics.skipped_reason = why
    m.numerics.executor = "none"
    log.dry_run = True
    log.reset()
    try:
        with torch.no_grad():
            out = candidate(*inputs)
    except CandidateFailure:
        raise
    except Exception as exc:
        raise _classify(plugin, exc, path, Reason.runtime_error, "numerics") from None
    finally:
        log.dry_run = False
    if log.total() == 0:
        raise CandidateFailure(Reason.no_kernel_launched, f"forward launched no {plugin.name} kernel", "numerics")
    if problem.catalogue_cost is None:  # the generic cost model needs the reference's output
        with torch.no_grad():
            out = problem.reference(*inputs)
    m.cost = problem.cost(inputs, out)
    m.notes.append(m.numerics.skipped_reason)


class _TimingInputs(NamedTuple):
    """What a timing rotates over: the input sets, pristine copies of them (to see mutation) and the
    reference's outputs on each (to recheck what was timed)."""

    sets: list[list]
    pristine: list[list]
    expected: list


def _timing_inputs(problem: BuiltProblem, gen: torch.Generator, count: int) -> _TimingInputs:
    sets = [_inputs(problem, "normal", gen) for _ in range(count)]
    pristine = [[x.clone() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
    return _TimingInputs(sets, pristine, [_expected(problem, s) for s in sets])


def _time(m: Measurement, problem: BuiltProblem, candidate, prepared: _TimingInputs, opts, checks: _Checks) -> None:
    sets, pristine, expected = prepared.sets, prepared.pristine, prepared.expected
    calls = 0

    def counted(*args):
        nonlocal calls
        calls += 1
        return candidate(*args)

    def timed(rounds: int) -> object:
        nonlocal calls
        calls = 0
        checks.log.reset()
        kept: dict[int, object] = {}
        report = time_pair(counted, problem.reference, sets, reps=opts.timing_reps,
                           max_seconds=opts.timing_max_seconds, rounds=rounds, keep=kept,
                           adaptive=opts.timing_adaptive, min_reps=opts.timing_min_reps,
                           rel_halfwidth=opts.timing_rel_halfwidth, launch_window_ms=opts.timing_launch_window_ms)
        checks.after_call("after timing", "timing")
        per_call = checks.per_call or {}
        short = {k: (checks.log.counts.get(k, 0), n * calls) for k, n in per_call.items()
                 if checks.log.counts.get(k, 0) < n * calls}
        if short:
            name, (seen, due) = next(iter(short.items()))
            raise checks.fail(Reason.output_caching, f"during timing, {calls} calls launched {name} {seen} times, "
                              f"{due} expected: results were replayed or work skipped", "timing")
        for index, s in enumerate(sets):
            changed = changed_inputs(pristine[index], s)
            if changed:
                raise checks.fail(Reason.input_mutation, f"timing changed input set {index + 1}: {', '.join(changed)}",
                                  "timing")
        for index, out in kept.items():
            ref, ref64 = expected[index]
            result = check_trial_output("recheck", out, ref, ref64, problem.numerics_tolerance)
            if not result.passed:
                raise checks.fail(Reason.recheck_mismatch, f"the output timed on input set {index + 1}, rechecked "
                                  f"after timing: {result.message}", "timing")
        return report

    timing = timed(1)
    peaks = peaks_for(m.environment.device) if m.environment.device else None
    if peaks is not None and m.cost is not None:
        floor = roofline.t_floor_ms(m.cost.flops, m.cost.bytes_compulsory, peaks, m.cost.peak_mode)
        if roofline.utilization(floor, timing.candidate.median_ms) > opts.physics_limit:
            # believe an impossible time only after a second, independent timing
            timing = timed(2)
    m.timing = timing
    c = timing.candidate
    if c.host_late_reps and c.host_late_reps * 2 > c.reps:
        m.notes.append(f"the host took {c.host_median_ms:.3g} ms to enqueue one call (median), longer than the GPU's "
                       f"{timing.launch_window_ms:g} ms idle window after the cache flush, in {c.host_late_reps} of "
                       f"{c.reps} repetitions: the candidate's time includes host-side launch work")


def _sync() -> None:
    if torch.cuda.is_initialized():  # is_available() asks the driver each time; this is a flag
        torch.cuda.synchronize()
