"""Triton plug-in: launch hooks, compiler-error mapping, and compiled artifacts.

On a GPU the artifacts come from the kernels the candidate really launched (the
``CompiledKernel`` that ``JITFunction.run`` returns). Without a GPU, the candidate runs in the
interpreter (``TRITON_INTERPRET=1``) for numerics; its first launch of each kernel is recorded and
the same kernel, imported again uncompiled-for-interpretation, is compiled ahead of time for
sm_90 with the same specialization (argument types, divisibility, constexprs, warps, stages).

An autotuned kernel (``triton.autotune``) is described by the config the autotuner chose: its
timing launches are not recorded. The interpreter has no device to time configs on, so there the
first config that survives pruning runs, and the verdict says so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kernelgate.dsl import Launch, LaunchLog
from kernelgate.dsl import triton_facts
from kernelgate.integrity import compiler_section
from kernelgate.models import KernelArtifact, Reason

__all__ = ["PLUGIN", "TritonPlugin", "AOT_TARGET"]

AOT_TARGET = ("cuda", 90, 32)
"""Target for ahead-of-time compilation without a GPU: sm_90 (H100/H200), warp size 32."""

AOT_TIMEOUT_S = 300
"""Ahead-of-time compilation of all of one candidate's kernels must finish within this."""

ASM_LIMIT_CHARS = 200_000
"""Each artifact kept on the verdict is cut to this size (a large PTX is megabytes)."""

_IMPORT_RE = re.compile(r"^\s*(import\s+triton\b|from\s+triton\b)", re.MULTILINE)


def launch_name(kernel: Any) -> str:
    return kernel.fn.__name__ if hasattr(kernel, "fn") else str(kernel)


def _grid_list(grid: Any, args: tuple, kwargs: dict, kernel: Any) -> list[int] | None:
    try:
        if callable(grid):
            names = list(getattr(kernel, "arg_names", []))
            meta = dict(zip(names, args))
            meta.update(kwargs)
            grid = grid(meta)
        return [int(g) for g in grid]
    except Exception:
        return None


class TritonPlugin:
    name = "triton"
    kernelbench_backend = "triton"
    """KernelBench's name for this DSL (its ``backend`` argument), read by the adapter and the CLI."""
    facts = staticmethod(triton_facts.facts)
    """DSL-neutral facts of one compiled kernel (pure text parsing), for the diagnosis rules."""
    hints = triton_facts.HINTS
    """The fix for each finding code, in Triton's terms."""

    def detect(self, source: str) -> bool:
        return bool(_IMPORT_RE.search(source))

    def versions(self) -> dict[str, str]:
        import triton

        return {"triton": triton.__version__}

    def prepare(self, *, interpret: bool) -> LaunchLog:
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        log = LaunchLog()
        _hook_autotuner(log, interpret)
        if interpret:
            from triton.runtime.interpreter import InterpretedFunction as kernel_class
        else:
            from triton.runtime import driver
            from triton.runtime.jit import JITFunction as kernel_class

            # Triton builds its driver's helper module (a C compiler runs) on first use; an autotuner
            # reaches the driver before any launch, so do it here, before the guard is armed.
            with compiler_section():
                driver.active.get_current_target()
                driver.active.get_benchmarker()
        original = kernel_class.run

        def run(self, *args, grid, warmup, **kwargs):
            launch = None
            if not warmup and not log.tuning:  # recorded before it runs, so a launch that fails can still be compiled
                launch = Launch(self, tuple(_stub(a) for a in args), {k: _stub(v) for k, v in kwargs.items()},
                                _grid_list(grid, args, kwargs, self))
                log.record(launch_name(self), launch)
            began = time.perf_counter()
            try:
                if log.dry_run:
                    result = None
                else:
                    with compiler_section():  # a first launch compiles (ptxas runs as a process)
                        result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
                if launch is not None and launch_name(self) not in log.first_call_seconds:
                    log.first_call_seconds[launch_name(self)] = time.perf_counter() - began
            except Exception as exc:
                exc.kernelgate_def_line = _def_line(getattr(self, "fn", None))  # for classify_error
                raise
            if launch is not None and not interpret and launch.compiled is None:
                launch.compiled = result
            return result

        kernel_class.run = run
        return log

    def classify_error(self, exc: BaseException) -> tuple[Reason, str] | None:
        from triton.compiler.errors import CompilationError

        chain: BaseException | None = exc
        while chain is not None:
            if isinstance(chain, CompilationError):
                return Reason.compile_error, _trim_compile_error(str(chain), getattr(exc, "kernelgate_def_line", None))
            chain = chain.__cause__ or chain.__context__
        text = f"{type(exc).__name__}: {exc}"
        if "PassManager::run failed" in text or "ptxas" in text.lower():
            return Reason.compile_error, text[-2000:]
        return None

    def artifacts(self, log: LaunchLog, source_path: Path, *, interpret: bool) -> tuple[list[KernelArtifact], list[str]]:
        if interpret:
            found, notes = _artifacts_ahead_of_time(log, source_path)
            return found, log.notes + notes
        notes: list[str] = list(log.notes)
        found: list[KernelArtifact] = []
        for name, launch in log.first.items():
            try:
                compiled = launch.compiled
                compiled = compiled.result() if hasattr(compiled, "result") else compiled
                target = f"{compiled.metadata.target.backend}:{compiled.metadata.target.arch}"
                found.append(_describe(name, compiled, target, log.counts.get(name, 0), launch, gpu=True, notes=notes))
            except Exception as exc:
                notes.append(f"no artifacts for Triton kernel {name}: {type(exc).__name__}: {str(exc)[:300]}")
        return found, notes


def _hook_autotuner(log: LaunchLog, interpret: bool) -> None:
    """Keep ``triton.autotune``'s timing launches out of the log; in the interpreter, skip the timing."""
    from triton.runtime.autotuner import Autotuner

    original = getattr(Autotuner._bench, "__wrapped__", Autotuner._bench)  # one hook however often prepared

    def bench(self, *args, config, **meta):
        log.tuning += 1
        try:
            if interpret:  # nothing to time on: rank the configs in their written order
                note = (f"{launch_name(self)} is autotuned over {len(self.configs)} configs: without a GPU only the "
                        "first that survives pruning ran (numerics, artifacts); the others were not checked")
                if note not in log.notes:
                    log.notes.append(note)
                return [float(self.configs.index(config))] * 3
            return original(self, *args, config=config, **meta)
        finally:
            log.tuning -= 1

    bench.__wrapped__ = original  # type: ignore[attr-defined]
    Autotuner._bench = bench


# --- ahead-of-time compilation without a GPU -------------------------------------------------
#
# The interpreter patches triton.language in place while kernels run, so compiling in the same
# process is unreliable. Each first launch is written down (tensors as dtype + address, which is
# all specialization looks at) and compiled in a fresh process: `python -m kernelgate.dsl.triton`.


class _TensorStub:
    """Stands in for a tensor argument: Triton specializes on its dtype and address alignment."""

    def __init__(self, dtype: str, ptr: int) -> None:
        import torch

        self.dtype = getattr(torch, dtype)
        self._ptr = ptr

    def data_ptr(self) -> int:
        return self._ptr


def _stub(value: Any) -> Any:
    """A launch argument as the log keeps it: a tensor as a ``_TensorStub`` (its dtype and address),
    so that the first call's inputs and output are not held for the rest of the screen (the judge
    could not free a 6 GB input the candidate's process still holds)."""
    import torch

    return _decode(_encode(value)) if isinstance(value, torch.Tensor) else value  # one tensor encoding


def _encode(value: Any) -> Any:
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return {"__tensor__": str(value.dtype).removeprefix("torch."), "ptr": int(value.data_ptr())}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_encode(v) for v in value]
    return {"__repr__": repr(value)[:100]}


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "__tensor__" in value:
        return _TensorStub(value["__tensor__"], value["ptr"])
    if isinstance(value, dict):
        raise TypeError(f"argument {value['__repr__']} cannot be reproduced for compilation")
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def _artifacts_ahead_of_time(log: LaunchLog, source_path: Path) -> tuple[list[KernelArtifact], list[str]]:
    import json
    import tempfile

    if not log.first:
        return [], []
    with tempfile.TemporaryDirectory(dir=source_path.parent) as tmp:
        request = Path(tmp) / "launches.json"
        answer = Path(tmp) / "artifacts.json"
        launches = [{"name": name, "count": log.counts.get(name, 0), "grid": launch.grid,
                     "args": [_encode(a) for a in launch.args],
                     "kwargs": {k: _encode(v) for k, v in launch.kwargs.items()}}
                    for name, launch in log.first.items()]
        request.write_text(json.dumps({"source": str(source_path), "launches": launches}))
        env = dict(os.environ, TRITON_INTERPRET="0")
        proc = subprocess.run([sys.executable, "-m", "kernelgate.dsl.triton", str(request), str(answer)],
                              capture_output=True, text=True, env=env, timeout=AOT_TIMEOUT_S)
        if proc.returncode != 0 or not answer.exists():
            return [], [f"ahead-of-time compile failed: {(proc.stderr or proc.stdout)[-800:]}"]
        data = json.loads(answer.read_text())
    log.compile_errors.extend(data["compile_errors"])
    return [KernelArtifact.model_validate(k) for k in data["kernels"]], data["notes"]


def _aot_main(request_path: str, answer_path: str) -> None:
    import json

    request = json.loads(Path(request_path).read_text())
    module = _import_uninterpreted(Path(request["source"]))
    from triton.compiler.errors import CompilationError

    kernels, notes, compile_errors = [], [], []
    for item in request["launches"]:
        name = item["name"]
        try:
            launch = Launch(kernel=None, args=tuple(_decode(a) for a in item["args"]),
                            kwargs={k: _decode(v) for k, v in item["kwargs"].items()}, grid=item["grid"])
            jit_fn = _find_jit_function(module, name)
            launch.kernel = jit_fn
            compiled = _compile_ahead(jit_fn, launch)
            kernels.append(_describe(name, compiled, f"cuda:{AOT_TARGET[1]}", item["count"], launch, gpu=False,
                                     notes=notes).model_dump(mode="json"))
        except CompilationError as exc:
            compile_errors.append(f"kernel {name}, " + _trim_compile_error(str(exc), _def_line(jit_fn.fn)))
        except Exception as exc:
            notes.append(f"no artifacts for Triton kernel {name}: {type(exc).__name__}: {str(exc)[:400]}")
    Path(answer_path).write_text(json.dumps({"kernels": kernels, "notes": notes, "compile_errors": compile_errors}))


def _def_line(fn) -> int | None:
    """Line of ``def`` in the candidate file: Triton numbers error lines from it."""
    import inspect

    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    for offset, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            return first + offset
    return None


def _trim_compile_error(text: str, def_line: int | None = None) -> str:
    """Keep the compiler's own message, with its kernel-relative position as a candidate line."""
    if def_line is not None:
        text = re.sub(r"^at (\d+):(\d+):", lambda m: f"line {def_line + int(m.group(1)) - 1} "
                      f"(column {m.group(2)}):", text, count=1, flags=re.MULTILINE)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith("Traceback") and "site-packages" not in ln]
    return "\n".join(keep[-25:])[:3000]


def _import_uninterpreted(source_path: Path):
    """Import the candidate again with the interpreter off, so its kernels are ``JITFunction``s."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        spec = importlib.util.spec_from_file_location(source_path.stem + "_kernelgate_aot", source_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        os.environ["TRITON_INTERPRET"] = previous or "0"


def _find_jit_function(module, name: str):
    from triton.runtime.jit import JITFunction

    for value in vars(module).values():
        inner = value
        while inner is not None and not isinstance(inner, JITFunction):
            inner = getattr(inner, "fn", None)  # Autotuner / Heuristics wrap a JITFunction in .fn
        if isinstance(inner, JITFunction) and inner.fn.__name__ == name:
            return inner
    raise LookupError(f"{name} is not a module-level @triton.jit function")


def _compile_ahead(jit_fn, launch: Launch):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = GPUTarget(*AOT_TARGET)
    backend = make_backend(target)
    binder = create_function_from_signature(jit_fn.signature, jit_fn.params, backend)
    kwargs = dict(launch.kwargs)
    kwargs.setdefault("debug", False)
    bound_args, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = jit_fn._pack_args(backend, kwargs, bound_args, specialization, options)
    return triton.compile(ASTSource(jit_fn, signature, constexprs, attrs), target=target, options=options.__dict__)


_PTXAS_RELEASE_RE = re.compile(r"release (\d+)\.(\d+)")
_PTX_VERSION_RE = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.MULTILINE)


def _ptxas_release(path: str) -> tuple[int, int] | None:
    """The CUDA release of a ptxas (``ptxas --version``: "release 12.8"), or None if it does not run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = _PTXAS_RELEASE_RE.search(out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _tritons_ptxas(arch: int) -> str | None:
    """The ptxas Triton itself assembles with for ``sm_<arch>`` (``TRITON_PTXAS_PATH`` or a bundled one)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError:
        get_ptxas = None
    if get_ptxas is not None:
        for args in ((arch,), ()):  # Triton 3.5+ picks by arch (3.9: ptxas-blackwell from sm_90 on)
            try:
                return str(get_ptxas(*args).path)
            except TypeError:
                continue
            except Exception:
                break
    try:
        from triton import knobs

        return str(knobs.nvidia.ptxas.path)
    except Exception:
        return None


def _ptxas_candidates(arch: int) -> list[tuple[str, str, tuple[int, int]]]:
    """Every ptxas that runs here, as (label, path, release), in the order to try them.

    The one Triton itself uses for this arch first (so the counts are the ones the candidate gets
    on a GPU), then the others newest first: the rest of Triton's bundled ones, ``ptxas`` on PATH,
    ``/usr/local/cuda/bin/ptxas``. A later one is only asked when an earlier one cannot assemble
    the PTX (a ptxas older than the PTX ``.version`` refuses it).
    """
    import shutil

    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    first = [("Triton's ptxas", _tritons_ptxas(arch))]
    others = [("Triton's bundled ptxas", str(bundled / "ptxas")),
              ("Triton's bundled ptxas-blackwell", str(bundled / "ptxas-blackwell")),
              ("ptxas on PATH", shutil.which("ptxas")), ("CUDA toolkit ptxas", "/usr/local/cuda/bin/ptxas")]
    found: list[tuple[str, str, tuple[int, int]]] = []
    seen: set[str] = set()
    for group in (first, others):
        runs = []
        for label, path in group:
            if not path or not os.path.isfile(path) or os.path.realpath(path) in seen:
                continue
            seen.add(os.path.realpath(path))
            release = _ptxas_release(path)
            if release is not None and all(release != r for _, _, r in found + runs):
                runs.append((label, path, release))  # a second copy of one release would say the same
        found += sorted(runs, key=lambda c: c[2], reverse=True)
    return found


def _ptxas_resources(ptx: str, arch: int) -> tuple[int | None, int | None, str | None]:
    """Registers per thread and spill bytes from ptxas, and a note when no ptxas could read the PTX.

    Tries the ptxas of ``_ptxas_candidates`` in turn until one assembles the PTX; the note says
    which were tried and what each answered.
    """
    import tempfile

    candidates = _ptxas_candidates(arch)
    version = _PTX_VERSION_RE.search(ptx)
    about = f"PTX .version {version.group(1) if version else 'unknown'} for sm_{arch}a"
    if not candidates:
        return None, None, (f"registers and spills not read: no ptxas here ({about}): Triton's bundled ptxas "
                            "is missing and there is none on PATH or in /usr/local/cuda/bin")
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        for label, path, release in candidates:
            try:
                proc = subprocess.run([path, "-v", f"--gpu-name=sm_{arch}a", str(src), "-o", str(Path(tmp) / "k.o")],
                                      capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.SubprocessError) as exc:
                failures.append(f"{label} {release[0]}.{release[1]}: {type(exc).__name__}: {exc}")
                continue
            text = proc.stdout + proc.stderr
            regs = re.search(r"Used (\d+) registers", text)
            if proc.returncode == 0 and regs:
                spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", text)
                return int(regs.group(1)), (sum(int(s) for s in spills) if spills else None), None
            said = next((ln.strip() for ln in text.splitlines() if "fatal" in ln or "error" in ln.lower()),
                        text.strip()[:200])
            failures.append(f"{label} {release[0]}.{release[1]} (exit {proc.returncode}): "
                            f"{said.replace(str(src), 'the PTX')[:300]}")
    return None, None, f"registers and spills not read: no ptxas could assemble the {about}: " + "; ".join(failures)


def _constexprs(launch: Launch) -> dict[str, Any]:
    """Compile-time constants of a launch, passed by keyword or by position."""
    import inspect

    scalar = (int, float, bool, str)
    found = {k: v for k, v in launch.kwargs.items() if isinstance(v, scalar) and k != "debug"}
    fn = getattr(launch.kernel, "fn", None)
    if fn is not None:
        for (name, param), value in zip(inspect.signature(fn).parameters.items(), launch.args):
            if isinstance(value, scalar) and "constexpr" in str(param.annotation):
                found[name] = value
    return found


def _describe(name: str, compiled, target: str, count: int, launch: Launch, *, gpu: bool,
              notes: list[str] | None = None) -> KernelArtifact:
    meta = compiled.metadata
    asm = {}
    for key in ("ttgir", "ptx"):
        if key in compiled.asm:
            asm[key] = str(compiled.asm[key])[:ASM_LIMIT_CHARS]
    try:
        asm["sass"] = str(compiled.asm["sass"])[:ASM_LIMIT_CHARS]
    except Exception:
        pass
    registers = spills = None
    if gpu and getattr(compiled, "n_regs", None) is not None:
        registers, spills = int(compiled.n_regs), int(compiled.n_spills)
    elif "ptx" in compiled.asm:
        registers, spills, why = _ptxas_resources(compiled.asm["ptx"], int(target.split(":")[1]))
        if why is not None and notes is not None:
            notes.append(f"Triton kernel {name}: {why}")
    constexprs = _constexprs(launch)
    return KernelArtifact(
        name=name,
        dsl="triton",
        target=target,
        launches=count,
        num_warps=getattr(meta, "num_warps", None),
        num_stages=getattr(meta, "num_stages", None),
        shared_bytes=getattr(meta, "shared", None),
        registers=registers,
        spill_bytes=spills,
        grid=launch.grid,
        constexprs=constexprs,
        asm=asm,
    )


PLUGIN = TritonPlugin()


if __name__ == "__main__":
    _aot_main(sys.argv[1], sys.argv[2])
