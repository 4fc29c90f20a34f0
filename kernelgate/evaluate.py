"""The worker's side of a screen: load, check numerics, collect artifacts, time. Runs in the child.

Each stage adds to one ``Measurement``; ``emit`` sends it to the parent after every stage, so a
crash in a later stage never loses what an earlier one found. A candidate-caused failure ends the
run with ``Measurement.failure`` set; nothing here raises on a bad candidate.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

import torch

from kernelgate import compile_cache, roofline
from kernelgate.dsl import get_plugin
from kernelgate.hardware import detect, peaks_for
from kernelgate.models import Environment, Failure, Measurement, NumericsReport, Reason, TrialResult
from kernelgate.numerics import TOLERANCES, compare
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


def _classify(plugin, exc: BaseException, source_path: Path, default: Reason, stage: str) -> CandidateFailure:
    mapped = plugin.classify_error(exc)
    if mapped is not None:
        return CandidateFailure(mapped[0], mapped[1], stage)
    text = describe_exception(exc, source_path)
    if "out of memory" in text.lower():
        return CandidateFailure(Reason.crash, "out of memory: " + text, stage)
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


def evaluate(job, workdir: Path, emit: Callable[[str, Measurement | None], None],
             wait_for_go: Callable[[], None] = lambda: None) -> Measurement:
    """Run every worker stage for one job; ``emit(phase, partial)`` reports progress.

    ``wait_for_go`` blocks before timing until the supervisor says the machine is quiet.
    """
    opts = job.options
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    interpret = not cuda
    plugin = get_plugin(job.candidate.dsl)
    _use_compile_cache(opts, workdir)
    log = plugin.prepare(interpret=interpret)
    m = Measurement(environment=_environment(plugin, interpret))
    seed = int.from_bytes(os.urandom(4), "little")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    clock = time.perf_counter()

    def stage_done(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        m.stage_seconds[name] = round(now - clock, 4)
        clock = now

    try:
        emit("load", None)
        problem = build_problem(job.problem, device, seed)  # ProblemError: the caller's mistake
        log.problem_dtype = str(problem.dtype).removeprefix("torch.")
        path, entry = _load_candidate(plugin, job.candidate.source, job.candidate.entry, workdir)
        if isinstance(problem.reference, torch.nn.Module):  # its state is copied into the candidate next
            randomize_state(problem.reference, gen)
        try:
            candidate, copied, note = problem.build_candidate(entry)
        except Exception as exc:
            raise _classify(plugin, exc, path, Reason.runtime_error, "load") from None
        if note:
            m.notes.append(note)
        stage_done("load")
        emit("run", m)
        m.numerics = NumericsReport(checked=False, passed=False, state_copied=copied,
                                    executor="interpreter" if interpret else "gpu",
                                    atol=TOLERANCES[problem.dtype].atol, rtol=TOLERANCES[problem.dtype].rtol)
        try:
            _check_numerics(m, problem, candidate, plugin, log, path, gen, opts, interpret)
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
        stage_done("artifacts")
        if cuda and m.numerics.passed:
            emit("timing", m)
            wait_for_go()
            _time(m, problem, candidate, gen, opts)
            stage_done("timing")
        elif not cuda:
            m.notes.append("no GPU on this machine: nothing was timed")
    except CandidateFailure as failure:
        m.failure = failure.failure
    return m


def _check_numerics(m: Measurement, problem: BuiltProblem, candidate, plugin, log, path: Path,
                    gen: torch.Generator, opts, interpret: bool) -> None:
    reference64 = problem.reference_fp64()
    for index, distribution in enumerate(DISTRIBUTIONS[: opts.numerics_trials]):
        inputs = problem.make_inputs(distribution, gen)
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
        try:
            result, ref = compare(distribution, candidate, problem.reference, reference64, inputs, problem.dtype)
        except Exception as exc:
            raise _classify(plugin, exc, path, Reason.runtime_error, "numerics") from None
        if index == 0:
            if log.total() == 0:
                raise CandidateFailure(Reason.no_kernel_launched, f"forward launched no {plugin.name} kernel: the "
                                       "output was computed some other way", "numerics")
            m.cost = problem.cost(inputs, ref)
        if not torch.isfinite(ref).any():
            m.notes.append(f"trial {distribution}: the reference is not finite on these inputs; trial skipped")
            continue
        m.numerics.trials.append(result)
        if not result.passed:
            m.numerics.checked = True
            raise CandidateFailure(result.reason, f"trial {index + 1} ({distribution}): {result.message}", "numerics")
    m.numerics.checked = True
    m.numerics.passed = bool(m.numerics.trials)


def _static_only(m, problem, candidate, log, inputs, path, plugin, why: str) -> None:
    """Nothing can execute here: run forward with kernels recorded but not executed, for artifacts."""
    m.numerics.skipped_reason = why
    m.numerics.executor = "none"
    log.dry_run = True
    log.reset()
    try:
        with torch.no_grad():
            out = candidate(*inputs)
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


def _time(m: Measurement, problem: BuiltProblem, candidate, gen: torch.Generator, opts) -> None:
    sets = [problem.make_inputs("normal", gen) for _ in range(opts.timing_input_sets)]
    timing = time_pair(candidate, problem.reference, sets, reps=opts.timing_reps, max_seconds=opts.timing_max_seconds)
    peaks = peaks_for(m.environment.device) if m.environment.device else None
    if peaks is not None and m.cost is not None:
        floor = roofline.t_floor_ms(m.cost.flops, m.cost.bytes_compulsory, peaks, m.cost.peak_mode)
        if roofline.utilization(floor, timing.candidate.median_ms) > opts.physics_limit:
            # believe an impossible time only after a second, independent timing
            timing = time_pair(candidate, problem.reference, sets, reps=opts.timing_reps,
                               max_seconds=opts.timing_max_seconds, rounds=2)
    m.timing = timing
