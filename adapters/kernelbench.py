"""KernelBench: problem files, checkouts, ``ModelNew`` candidates, and its eval function's result.

A problem file has ``Model``, ``get_inputs()``, ``get_init_inputs()`` at module level. Shapes in
such files are module globals (``batch_size = 16``); ``load_problem_module`` can set them before
anything reads them, which is how a smaller shape is screened without a GPU.

A checkout holds ``KernelBench/level<l>/<id>_<Name>.py``; ``problem(checkout, id, level=l)`` makes
the ``Problem``. ``read_candidate`` reads a ``ModelNew`` file for the cuda, triton or tilelang
backend. The reference's parameters reach the candidate through ``load_state_dict`` in the worker
(``kernelgate.problems.BuiltProblem.build_candidate``), not through re-seeding.
``eval_kernel_against_ref`` takes KernelBench's arguments and returns its result fields with the
verdict beside them. Batches over a folder of generations are in ``kernelgate.adapters.batch``.
"""

from __future__ import annotations

import importlib.util
import re
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import Field

from kernelgate._base import Model as _Model
from kernelgate.errors import ProblemError
from kernelgate.models import Verdict

__all__ = [
    "load_problem_module",
    "shape_globals",
    "dataset_dir",
    "problem_files",
    "problem_path",
    "problem",
    "dsl_for_backend",
    "read_candidate",
    "GENERATION_RE",
    "KernelExecResult",
    "result_from_verdict",
    "eval_kernel_against_ref",
    "TensorSpec",
    "ProblemFootprint",
    "problem_footprint",
    "check_footprint",
    "shrink_shape",
]

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def shape_globals(module: ModuleType) -> dict[str, int]:
    """The module's integer globals: the shape parameters of a KernelBench file."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)}


def load_problem_module(path: str | Path, overrides: dict[str, int] | None = None) -> ModuleType:
    """Import a KernelBench-style file and apply shape overrides to its globals."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"problem file not found: {path}")
    name = f"kernelgate_problem_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ProblemError(f"problem file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing:
        raise ProblemError(f"problem file {path} lacks {', '.join(missing)}")
    known = shape_globals(module)
    unknown = set(overrides or {}) - set(known)
    if unknown:
        raise ProblemError(f"problem file {path} has no integer global {', '.join(sorted(unknown))}; "
                           f"it has {', '.join(sorted(known)) or 'none'}")
    for key, value in (overrides or {}).items():
        setattr(module, key, value)
    return module


# --- a KernelBench checkout: problems by level and id ------------------------------------------

_PROBLEM_RE = re.compile(r"^(\d+)_.+\.py$")
GENERATION_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
"""How KernelBench's generation scripts name a sample in ``runs/<run_name>/``."""



def dataset_dir(checkout: str | Path) -> Path:
    """The folder holding ``level1/``...: a checkout's ``KernelBench/``, or that folder itself."""
    root = Path(checkout)
    for candidate in (root / "KernelBench", root):
        if candidate.is_dir() and any(p.is_dir() and p.name.startswith("level") for p in candidate.iterdir()):
            return candidate
    raise ProblemError(f"{root} is not a KernelBench checkout: no KernelBench/level<N>/ folder in it")


def problem_files(checkout: str | Path, level: int) -> dict[int, Path]:
    """Problem id -> file, for one level (``KernelBench/level<l>/<id>_<Name>.py``)."""
    folder = dataset_dir(checkout) / f"level{level}"
    if not folder.is_dir():
        raise ProblemError(f"no level {level} in {dataset_dir(checkout)} (no folder {folder.name})")
    found: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        match = _PROBLEM_RE.match(path.name)
        if match and path.is_file():
            found[int(match.group(1))] = path
    return found


def problem_path(checkout: str | Path, level: int, problem_id: int) -> Path:
    files = problem_files(checkout, level)
    if problem_id not in files:
        raise ProblemError(f"level {level} of {dataset_dir(checkout)} has no problem {problem_id}")
    return files[problem_id]


def problem(source: str | Path, problem_id: int | None = None, *, level: int | None = None,
            dtype: str | None = None, shape: dict[str, int] | None = None):
    """A ``Problem`` from a problem file, or from a checkout with ``level`` and ``problem_id``.

    ``problem("KernelBench/level1/19_ReLU.py")`` or ``problem(checkout, 19, level=1)``.
    ``shape`` overrides integer globals of the file (``{"batch_size": 8}``).
    """
    from kernelgate.models import Problem

    if problem_id is None:
        path = Path(source)
        if not path.is_file():
            raise ProblemError(f"problem file not found: {path}")
    else:
        if level is None:
            raise ProblemError("a problem id needs its level")
        path = problem_path(source, level, problem_id)
    return Problem(kind="kernelbench_file", name=str(path.resolve()), shape=dict(shape or {}), dtype=dtype)


def dsl_for_backend(backend: str | None) -> str | None:
    """The kernelgate DSL for a KernelBench backend name; None (detect from the source) for None."""
    if backend is None:
        return None
    from kernelgate.dsl import kernelbench_backends
    from kernelgate.errors import PluginError

    key, backends = backend.strip().lower(), kernelbench_backends()  # the plug-ins say which they are
    if key not in backends:  # KernelBench's cute, thunderkittens, hip: no plug-in here
        raise PluginError(key, "a KernelBench backend kernelgate does not screen; supported: "
                          + ", ".join(sorted(backends)))
    return backends[key]


def read_candidate(source: str | Path, *, backend: str | None = None, name: str | None = None,
                   metadata: dict | None = None):
    """A ``ModelNew`` candidate from a file path or a source string.

    ``backend`` is KernelBench's name (``cuda``, ``triton``, ``tilelang``); without it the DSL is
    detected from the source when screened.
    """
    from kernelgate.models import Candidate

    text, label = source, name
    if isinstance(source, Path) or ("\n" not in str(source) and str(source).endswith(".py")):
        path = Path(source)
        if not path.is_file():
            raise ProblemError(f"candidate file not found: {path}")
        text, label = path.read_text(encoding="utf-8", errors="replace"), name or path.name
    return Candidate(source=str(text), dsl=dsl_for_backend(backend), entry="ModelNew", name=label,
                     metadata=dict(metadata or {}))


# --- KernelBench's eval_kernel_against_ref, screened ------------------------------------------

_LOAD_REASONS = {"syntax_error", "load_error", "missing_entry", "compile_error", "load_timeout"}


class KernelExecResult(_Model):
    """The fields of KernelBench's ``KernelExecResult``, filled from a verdict, plus the verdict.

    Times are milliseconds (KernelBench's comment says "us"; its timers return ms). ``runtime`` is the
    candidate's mean over the timed repetitions and ``ref_runtime`` the library's, measured in the same
    run, interleaved. The ``metadata`` keys follow KernelBench's (``hardware``, ``compilation_error``,
    ``runtime_error``, ``correctness_issue``, ``correctness_trials``, ``max_difference``,
    ``excessive_speedup``), with every value a string, number or bool.
    """

    compiled: bool = False
    correctness: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    runtime: float = -1.0
    runtime_stats: dict[str, Any] = Field(default_factory=dict)
    ref_runtime: float = -1.0
    ref_runtime_stats: dict[str, Any] = Field(default_factory=dict)
    verdict: Verdict | None = None
    """The kernelgate ``Verdict`` this result was read from."""


def _stats(samples: list[float], hardware: str | None) -> dict[str, Any]:
    if not samples:
        return {}
    stats: dict[str, Any] = {"mean": statistics.fmean(samples), "std": statistics.pstdev(samples),
                             "min": min(samples), "max": max(samples), "median": statistics.median(samples),
                             "num_trials": len(samples)}
    if hardware:
        stats["hardware"] = hardware
    return stats


def result_from_verdict(verdict, *, measure_performance: bool = True,
                        excessive_speedup_threshold: float | None = 10.0) -> KernelExecResult:
    """KernelBench's result fields for a verdict.

    ``compiled`` is False when the candidate failed to load or compile; ``correctness`` is True only
    when numerics were actually checked and passed and the verdict is not a reject.
    """
    reason = verdict.reason.value if verdict.reason else None
    n = verdict.numerics
    device = verdict.environment.device if verdict.environment else None
    meta: dict[str, Any] = {"kernelgate_status": verdict.status.value, "kernelgate_reason": reason,
                            "kernelgate_summary": verdict.summary}
    if device is not None:
        meta["hardware"] = device.name
    compiled = reason not in _LOAD_REASONS
    if not compiled:
        meta["compilation_error_name"] = reason
        meta["compilation_error"] = verdict.failure.message if verdict.failure else reason
    elif verdict.failure is not None and reason in {"runtime_error", "crash", "run_timeout"}:
        meta["runtime_error_name"] = reason
        meta["runtime_error"] = verdict.failure.message
    correct = bool(n and n.checked and n.passed) and verdict.status.value != "reject"
    if n is not None and n.state_copied is not None:
        meta["state_dict_copied"] = n.state_copied
    if n is not None and n.trials:
        meta["correctness_trials"] = f"({sum(t.passed for t in n.trials)} / {len(n.trials)})"
        errors = [t.max_abs_error for t in n.trials if t.max_abs_error is not None]
        if errors:
            meta["max_difference"] = [float(e) for e in errors]
    if compiled and not correct:
        if n is not None and not n.checked:
            meta["correctness_issue"] = f"numerics not checked: {n.skipped_reason}"
        elif verdict.failure is not None:
            meta["correctness_issue"] = verdict.failure.message
    result = KernelExecResult(compiled=compiled, correctness=correct, metadata=meta, verdict=verdict)
    if measure_performance and correct and verdict.timing is not None:
        hardware = device.name if device else None
        result.runtime_stats = _stats(verdict.timing.candidate.samples_ms, hardware)
        result.ref_runtime_stats = _stats(verdict.timing.library.samples_ms, hardware)
        result.runtime = result.runtime_stats.get("mean", -1.0)
        result.ref_runtime = result.ref_runtime_stats.get("mean", -1.0)
        if excessive_speedup_threshold is not None and result.runtime > 0:
            result.metadata["excessive_speedup"] = result.ref_runtime / result.runtime > excessive_speedup_threshold
    return result


def _reference_file(original_model_src: str) -> Path:
    """The reference source in a file named by its hash (the worker imports problems by path)."""
    import hashlib
    import os

    digest = hashlib.sha256(original_model_src.encode()).hexdigest()[:24]
    env = os.environ.get("KERNELGATE_CACHE_DIR")
    root = (Path(env).expanduser() if env else Path.home() / ".cache" / "kernelgate") / "kernelbench_refs"
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"ref_{digest}.py"
    if not path.is_file() or path.read_text() != original_model_src:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(original_model_src)
        tmp.replace(path)
    return path


def _dtype_name(precision: Any) -> str | None:
    if precision is None:
        return None
    name = str(precision).rsplit(".", 1)[-1]
    name = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "half": "float16", "float": "float32"}.get(name, name)
    if name not in ("float32", "float16", "bfloat16"):
        raise ProblemError(f"precision {precision!r} is not float32, float16 or bfloat16")
    return name


def eval_kernel_against_ref(
    original_model_src: str,
    custom_model_src: str,
    seed_num: int = 42,
    num_correct_trials: int = 1,
    num_perf_trials: int = 10,
    measure_performance: bool = False,
    timing_method: str = "cuda_event",
    verbose: bool = False,
    build_dir: Any = None,
    device: Any = None,
    backend: str = "cuda",
    precision: Any = "float32",
    check_for_excessive_speedup: bool = True,
    excessive_speedup_threshold: float = 10,
    *,
    policy: Any = None,
    options: Any = None,
    runner: Any = None,
) -> KernelExecResult:
    """KernelBench's ``eval_kernel_against_ref``, answered by ``kernelgate.screen``.

    Same inputs and result fields; the verdict rides along as ``result.verdict``. Differences, all
    in the direction of a stricter, isolated screen:

    - the candidate runs in a worker process (a crash is a result, not a dead caller);
    - the reference's parameters are copied into ``ModelNew`` with ``load_state_dict`` after
      being randomized, instead of relying on ``seed_num`` (which is therefore unused);
    - ``num_correct_trials`` trials (at most 5) each draw inputs from another distribution;
    - when a GPU is present the library is always timed in the same run, interleaved with the
      candidate (``num_perf_trials`` repetitions, at least 5); ``measure_performance`` only
      decides whether ``runtime`` and ``ref_runtime`` are filled; ``timing_method``, ``build_dir``
      and ``device`` are accepted and not used (the worker uses the GPU the process sees: set
      ``CUDA_VISIBLE_DEVICES`` to choose one; compiled code goes to kernelgate's compile cache).
    ``backend`` is KernelBench's name (``cuda``, ``triton``, ``tilelang``) or None to detect it.
    """
    import logging

    from kernelgate.gate import screen
    from kernelgate.policy import DEFAULT_POLICY
    from kernelgate.worker import ScreenOptions

    spec = problem(_reference_file(original_model_src), dtype=_dtype_name(precision))
    candidate = read_candidate(custom_model_src if "\n" in custom_model_src else custom_model_src + "\n",
                               backend=backend, name="ModelNew")
    if options is None:
        options = ScreenOptions(numerics_trials=max(1, min(int(num_correct_trials), 5)),
                                timing_reps=max(5, int(num_perf_trials)))
    verdict = screen(candidate, spec, policy=policy or DEFAULT_POLICY, options=options, runner=runner)
    if verbose:
        logging.getLogger(__name__).info("%s", verdict.summary)
    return result_from_verdict(verdict, measure_performance=measure_performance,
                               excessive_speedup_threshold=excessive_speedup_threshold if check_for_excessive_speedup else None)


# --- a problem's footprint, without allocating it ---------------------------------------------


class TensorSpec(_Model):
    """One tensor's shape, dtype and size, read from a meta tensor (nothing allocated)."""

    shape: list[int]
    dtype: str
    bytes: int


class ProblemFootprint(_Model):
    """What one call of a KernelBench problem holds, measured on the ``meta`` device.

    ``get_inputs()``, ``Model(*get_init_inputs())`` and ``forward`` run under
    ``torch.device("meta")``: shapes and dtypes are real, no memory is taken, so a file whose
    inputs would not fit (KernelBench L1-19 ReLU, a 4096 x 393216 fp32 input, 6.4 GB) can be
    sized on any machine. ``shape`` holds the file's integer globals after ``overrides`` (the
    knobs ``--shape NAME=INT`` sets).
    """

    path: str
    shape: dict[str, int]
    """The file's integer globals, overrides applied."""
    overrides: dict[str, int] = Field(default_factory=dict)
    inputs: list[TensorSpec] = Field(default_factory=list)
    """The tensors ``get_inputs()`` returns (non-tensor inputs take no memory and are left out)."""
    input_bytes: int = 0
    parameter_bytes: int | None = None
    """Parameters and buffers of ``Model``; None when the model could not be built on ``meta``."""
    output_bytes: int | None = None
    outputs: list[TensorSpec] = Field(default_factory=list)
    error: str | None = None
    """Why the model or its forward could not run on ``meta`` (inputs are still sized)."""

    @property
    def total_bytes(self) -> int:
        """Inputs + parameters + output: one call's data (the parts that could be sized)."""
        return self.input_bytes + (self.parameter_bytes or 0) + (self.output_bytes or 0)

    def describe(self) -> str:
        """One line: the inputs, in shapes and bytes."""
        parts = [f"{t.dtype.removeprefix('torch.')}[{', '.join(map(str, t.shape))}]" for t in self.inputs]
        return (f"inputs {_gb(self.input_bytes)} ({', '.join(parts) or 'no tensors'}), "
                f"parameters {_gb(self.parameter_bytes)}, output {_gb(self.output_bytes)}")

    def too_large_message(self, limit_bytes: int, suggestion: dict[str, int] | None = None) -> str:
        """Why this problem cannot be screened here, naming ``--shape`` and the file's integer globals."""
        knobs = " ".join(f"{k}={v}" for k, v in self.shape.items()) or "none"
        text = (f"problem file {self.path} needs about {_gb(self.total_bytes)} for one call ({self.describe()}), "
                f"more than the {_gb(limit_bytes)} allowed here. Screen a smaller shape with --shape NAME=INT; "
                f"its integer globals are: {knobs}")
        if suggestion:
            text += ". For example: " + " ".join(f"--shape {k}={v}" for k, v in suggestion.items())
        return text


def _gb(nbytes: int | None) -> str:
    if nbytes is None:
        return "unknown"
    if nbytes >= 1e9:
        return f"{nbytes / 1e9:.2f} GB"
    return f"{nbytes / 1e6:.2f} MB"


def _tensor_specs(value: Any) -> list[TensorSpec]:
    """Every tensor in a value (nested lists, tuples and dicts included)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [TensorSpec(shape=list(value.shape), dtype=str(value.dtype).removeprefix("torch."),
                           bytes=value.numel() * value.element_size())]
    if isinstance(value, (list, tuple)):
        return [spec for item in value for spec in _tensor_specs(item)]
    if isinstance(value, dict):
        return [spec for item in value.values() for spec in _tensor_specs(item)]
    return []


def _not_on_meta(value: Any) -> list[str]:
    """Tensors that were made off the meta device (a file that names a device): they took memory."""
    import torch

    if isinstance(value, torch.Tensor):
        return [] if value.is_meta else [f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)} on {value.device}"]
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _not_on_meta(item)]
    return []


def problem_footprint(path: str | Path, overrides: dict[str, int] | None = None, *,
                      model: bool = True) -> ProblemFootprint:
    """Size a KernelBench problem file's inputs (and parameters and output) without allocating them.

    ``overrides`` sets integer globals first (as ``--shape`` does); ``model=False`` sizes the
    inputs only. Raises ``ProblemError`` when the file does not import, an override names no
    integer global, or ``get_inputs()`` fails on ``meta``; a model or forward that cannot run on
    ``meta`` is reported in ``error`` with the inputs still sized.
    """
    import torch

    module = load_problem_module(path, overrides)
    result = ProblemFootprint(path=str(path), shape=shape_globals(module), overrides=dict(overrides or {}))
    try:
        with torch.device("meta"):
            inputs = list(module.get_inputs())
    except Exception as exc:
        raise ProblemError(f"problem file {path}: get_inputs() failed on the meta device: "
                           f"{type(exc).__name__}: {exc}") from exc
    result.inputs = _tensor_specs(inputs)
    result.input_bytes = sum(t.bytes for t in result.inputs)
    stray = _not_on_meta(inputs)
    if stray:
        result.error = "get_inputs() made tensors off the meta device: " + ", ".join(stray)
    if not model:
        return result
    stage = "get_init_inputs()"
    try:
        with torch.device("meta"), torch.no_grad():
            init_inputs = list(module.get_init_inputs())
            stage = "Model(*get_init_inputs())"
            reference = module.Model(*init_inputs)
            result.parameter_bytes = sum(t.numel() * t.element_size()
                                         for t in list(reference.parameters()) + list(reference.buffers()))
            stage = "forward"
            output = reference(*inputs)
        result.outputs = _tensor_specs(output)
        result.output_bytes = sum(t.bytes for t in result.outputs)
    except Exception as exc:  # noqa: BLE001 -- reported in ``error``; the inputs are still sized
        failed = f"{stage} failed on the meta device: {type(exc).__name__}: {str(exc)[:300]}"
        result.error = f"{result.error}; {failed}" if result.error else failed
    return result


def check_footprint(path: str | Path, overrides: dict[str, int] | None, limit_bytes: int, *,
                    factor: float = 1.0, suggest: bool = True) -> ProblemFootprint:
    """The footprint, or ``ProblemError`` when ``factor`` times it exceeds ``limit_bytes``.

    ``factor`` is how many copies of one call's data the caller will hold (reference in fp64,
    several input sets...). The error names ``--shape`` and the file's integer globals and, with
    ``suggest``, a shape that fits (``shrink_shape``).
    """
    footprint = problem_footprint(path, overrides)
    if footprint.total_bytes * factor <= limit_bytes:
        return footprint
    suggestion = None
    if suggest:
        try:
            fitted, fitted_fp = shrink_shape(path, int(limit_bytes / factor), overrides)
            suggestion = fitted if fitted_fp.total_bytes * factor <= limit_bytes else None
        except ProblemError:
            suggestion = None
    raise ProblemError(footprint.too_large_message(int(limit_bytes / factor), suggestion))


def shrink_shape(path: str | Path, limit_bytes: int, overrides: dict[str, int] | None = None, *,
                 max_steps: int = 64) -> tuple[dict[str, int], ProblemFootprint]:
    """Integer-global overrides under which one call's data fits in ``limit_bytes``.

    Greedy: each step halves one integer global (above 1), among those whose halving lowers the
    footprint nearly the most (within 95% of the best saving) the largest, while ``Model`` and
    ``forward`` still run on ``meta``. Returns the overrides and their
    footprint; it may still be over the limit when no halving helps any more (the caller checks
    ``total_bytes``).
    """
    current = dict(overrides or {})
    footprint = problem_footprint(path, current)
    if footprint.error is not None:
        raise ProblemError(f"cannot shrink {path}: {footprint.error}")
    for _ in range(max_steps):
        if footprint.total_bytes <= limit_bytes:
            break
        trials: list[tuple[int, dict[str, int], ProblemFootprint]] = []
        for name, value in footprint.shape.items():
            if value <= 1:
                continue
            trial = {**current, name: value // 2}
            try:
                trial_fp = problem_footprint(path, trial)
            except ProblemError:
                continue
            if trial_fp.error is None and trial_fp.total_bytes < footprint.total_bytes:
                trials.append((value, trial, trial_fp))
        if not trials:
            break
        # among the halvings that save nearly the most (95%), the largest knob: batch and spatial
        # sizes shrink in turn instead of one of them down to 1
        saved = max(footprint.total_bytes - t[2].total_bytes for t in trials)
        _, current, footprint = max((t for t in trials if footprint.total_bytes - t[2].total_bytes >= 0.95 * saved),
                                    key=lambda t: t[0])
    return current, footprint
