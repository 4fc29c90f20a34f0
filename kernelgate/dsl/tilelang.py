"""TileLang plug-in: compile hooks, launch counting and the generated CUDA.

Every way a candidate builds a TileLang kernel (``tilelang.compile(prim_func, out_idx=...)``,
``@tilelang.jit`` in lazy or eager mode, the autotuner) ends in ``tilelang.jit.cached``. The hook
sits there: it times the compilation, names the kernel after its prim_func, and wraps the
compiled kernel so that each call is counted as a launch.

On a GPU the kernel is TileLang's own ``JITKernel`` and runs; its generated CUDA comes from it,
and PTX, SASS, registers and spills from compiling that source again with nvcc (TileLang's own
flags, cached). Without one, TileLang has no interpreter: the prim_func is lowered for sm_90a
(``tilelang.lower`` inside a ``tvm.target.Target`` context) and the kernel becomes a stand-in
that records its launch and returns NaN-filled outputs of the declared shapes, so the candidate's
forward can be run dry for static checks. Numerics need a GPU.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgate.dsl import Launch, LaunchLog
from kernelgate.dsl import _nvcc
from kernelgate.dsl import tilelang_facts
from kernelgate.integrity import compiler_section
from kernelgate.models import KernelArtifact, Reason

__all__ = ["PLUGIN", "TileLangPlugin", "STATIC_TARGET"]

STATIC_TARGET = {"kind": "cuda", "arch": "sm_90a"}
"""Target for lowering without a GPU: Hopper (H100/H200) with its own instructions."""

_IMPORT_RE = re.compile(r"^\s*(import\s+tilelang\b|from\s+tilelang\b)", re.MULTILINE)


@dataclass
class _Compiled:
    """One compiled prim_func, as the hook saw it."""

    name: str
    prim_func: Any
    out_idx: Any
    kernel_source: str = ""
    thread_extent: dict[str, int] = field(default_factory=dict)
    dynamic_shared_bytes: int | None = None
    target: str = ""
    kernel: Any = None
    """TileLang's ``JITKernel`` (GPU only)."""


def _symbol(prim_func) -> str:
    attrs = getattr(prim_func, "attrs", None)
    try:
        if attrs is not None and "global_symbol" in attrs:
            return str(attrs["global_symbol"])
    except Exception:
        pass
    return "main"


def _launch_shape(device_mod) -> tuple[dict[str, int], int | None]:
    """Grid and block extents, and dynamic shared memory, of the first device function."""
    try:
        for _, fn in device_mod.functions.items():
            attrs = fn.attrs
            if attrs is None or "thread_extent" not in attrs:
                continue
            extents = {str(k): int(v) for k, v in attrs["thread_extent"].items()}
            shared = int(attrs["dyn_shared_memory_buf"]) if "dyn_shared_memory_buf" in attrs else None
            return extents, shared
    except Exception:
        pass
    return {}, None


def _torch_dtype(name: str):
    import torch

    name = str(name)
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "int8": torch.int8,
            "uint8": torch.uint8, "bool": torch.bool}.get(name, torch.float32)


class _StandInKernel:
    """Without a GPU: records each call and returns NaN outputs of the declared shapes."""

    def __init__(self, compiled: _Compiled, log: LaunchLog) -> None:
        self._compiled = compiled
        self._log = log

    def __call__(self, *args, **kwargs):
        import torch

        self._log.record(self._compiled.name, Launch(self._compiled, (), {}, _grid(self._compiled)))
        if not self._log.dry_run:
            raise RuntimeError("TileLang kernels cannot run without a GPU (no interpreter)")
        func = self._compiled.prim_func
        out_idx = self._compiled.out_idx
        if out_idx is None:
            return None
        indices = [out_idx] if isinstance(out_idx, int) else list(out_idx)
        params = list(func.params)
        outs = []
        for index in indices:
            buffer = func.buffer_map[params[index]]
            try:
                shape = [int(s) for s in buffer.shape]
            except TypeError:  # a symbolic dimension: its size is only known from the inputs
                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                shape = list(first.shape) if first is not None else [1]
            outs.append(torch.full(shape, float("nan")).to(_torch_dtype(buffer.dtype)))
        return outs[0] if len(outs) == 1 else outs

    def get_kernel_source(self, *args, **kwargs) -> str:
        return self._compiled.kernel_source

    def __getattr__(self, name):
        raise AttributeError(f"{name!r} is not available on a TileLang kernel without a GPU")


class _CountedKernel:
    """On a GPU: TileLang's kernel, with each call counted."""

    def __init__(self, compiled: _Compiled, log: LaunchLog) -> None:
        self._compiled = compiled
        self._kernel = compiled.kernel
        self._log = log

    def __call__(self, *args, **kwargs):
        self._log.record(self._compiled.name, Launch(self._compiled, (), {}, _grid(self._compiled),
                                                     compiled=self._kernel))
        if self._log.dry_run:
            return None
        with compiler_section():  # TileLang's runtime, not candidate code: it may build or load lazily
            return self._kernel(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._kernel, name)


def _grid(compiled: _Compiled) -> list[int] | None:
    ext = compiled.thread_extent
    if not ext:
        return None
    return [ext.get("blockIdx.x", 1), ext.get("blockIdx.y", 1), ext.get("blockIdx.z", 1)]


def _threads(compiled: _Compiled) -> int | None:
    ext = compiled.thread_extent
    if not ext:
        return None
    return ext.get("threadIdx.x", 1) * ext.get("threadIdx.y", 1) * ext.get("threadIdx.z", 1)


class TileLangPlugin:
    name = "tilelang"
    kernelbench_backend = "tilelang"
    """KernelBench's name for this DSL (its ``backend`` argument), read by the adapter and the CLI."""
    cpu_numerics = False
    """TileLang has no interpreter: without a GPU a candidate is lowered and checked statically."""
    facts = staticmethod(tilelang_facts.facts)
    """DSL-neutral facts of one compiled kernel (pure text parsing), for the diagnosis rules."""
    hints = tilelang_facts.HINTS
    """The fix for each finding code, in TileLang's terms."""

    def __init__(self) -> None:
        self._compiled: dict[str, _Compiled] = {}

    def detect(self, source: str) -> bool:
        return bool(_IMPORT_RE.search(source))

    def versions(self) -> dict[str, str]:
        import tilelang

        found = {"tilelang": tilelang.__version__}
        try:
            import importlib.metadata

            found["apache-tvm-ffi"] = importlib.metadata.version("apache-tvm-ffi")
        except Exception:
            pass
        return found

    def prepare(self, *, interpret: bool) -> LaunchLog:
        import sys

        import tilelang  # noqa: F401  (imports tilelang.jit)

        tl_jit = sys.modules["tilelang.jit"]  # the attribute tilelang.jit is the decorator, not the module
        log = LaunchLog()
        original = tl_jit.cached
        plugin = self

        def cached(func=None, out_idx=None, *args, **kwargs):
            name = plugin._unique_name(_symbol(func), func)
            began = time.perf_counter()
            if interpret:
                with compiler_section():
                    compiled = plugin._lower_static(name, func, out_idx)
                kernel = _StandInKernel(compiled, log)
            else:
                with compiler_section():  # TileLang's compile and what it reads back may start processes (nvcc)
                    jit_kernel = original(func, out_idx, *args, **kwargs)
                    compiled = _Compiled(name=name, prim_func=func, out_idx=out_idx, kernel=jit_kernel)
                    plugin._describe_gpu(compiled)
                kernel = _CountedKernel(compiled, log)
            log.first_call_seconds.setdefault(name, time.perf_counter() - began)
            plugin._compiled[name] = compiled
            return kernel

        tl_jit.cached = cached  # tilelang.compile and JITImpl.compile both call this name
        return log

    def _unique_name(self, symbol: str, func) -> str:
        name, n = symbol, 1
        while name in self._compiled and self._compiled[name].prim_func is not func:
            n += 1
            name = f"{symbol}_{n}"
        return name

    def _lower_static(self, name: str, func, out_idx) -> _Compiled:
        import tilelang
        from tilelang import tvm

        target = tvm.target.Target(STATIC_TARGET)
        with target:
            artifact = tilelang.lower(func, target=target)
        extents, shared = _launch_shape(artifact.device_mod)
        return _Compiled(name=name, prim_func=func, out_idx=out_idx, kernel_source=artifact.kernel_source,
                         thread_extent=extents, dynamic_shared_bytes=shared, target="cuda:90a")

    def _describe_gpu(self, compiled: _Compiled) -> None:
        kernel = compiled.kernel
        try:
            compiled.kernel_source = kernel.get_kernel_source()
        except Exception:
            compiled.kernel_source = ""
        artifact = getattr(kernel, "artifact", None)
        if artifact is not None and getattr(artifact, "device_mod", None) is not None:
            compiled.thread_extent, compiled.dynamic_shared_bytes = _launch_shape(artifact.device_mod)
        try:
            import torch

            major, minor = torch.cuda.get_device_capability()
            compiled.target = f"cuda:{major}{minor}{'a' if major == 9 else ''}"
        except Exception:
            compiled.target = "cuda"

    def classify_error(self, exc: BaseException) -> tuple[Reason, str] | None:
        chain: BaseException | None = exc
        while chain is not None:
            module = type(chain).__module__ or ""
            text = str(chain)
            if module.startswith(("tvm", "tilelang")) or "Compilation error" in text or "nvcc" in text.lower():
                return Reason.compile_error, _trim_tilelang_error(f"{type(chain).__name__}: {text}")
            if _raised_by_tilelang(chain):  # the frontend checks a prim_func while it is built
                return Reason.compile_error, _candidate_frames(chain) + f"{type(chain).__name__}: {text}"[:2000]
            chain = chain.__cause__ or chain.__context__
        return None

    def artifacts(self, log: LaunchLog, source_path: Path, *, interpret: bool) -> tuple[list[KernelArtifact], list[str]]:
        notes: list[str] = []
        found: list[KernelArtifact] = []
        for name in log.first:
            compiled = self._compiled.get(name)
            if compiled is None or not compiled.kernel_source:
                notes.append(f"no generated CUDA for TileLang kernel {name}")
                continue
            asm = {"cuda": compiled.kernel_source[:_nvcc.ASM_LIMIT_CHARS]}
            registers = spills = static_shared = None
            nvcc = _nvcc.compile_static(compiled.kernel_source, options=_tilelang_nvcc_options(),
                                        source_name="tilelang_kernel.cu", label="tilelang")
            if nvcc.ok:
                view, res = _nvcc.kernel_view(nvcc, _device_symbol(compiled), log.problem_dtype)
                asm.update(view)
                registers, spills, static_shared = res.registers, res.spill_bytes, res.shared_bytes
            else:
                notes.append(f"nvcc could not compile TileLang kernel {name} for PTX/SASS: {nvcc.errors[:600]}")
            shared = (static_shared or 0) + (compiled.dynamic_shared_bytes or 0) if nvcc.ok or \
                compiled.dynamic_shared_bytes else None
            found.append(KernelArtifact(
                name=name, dsl="tilelang", target=compiled.target or "cuda", launches=log.counts.get(name, 0),
                num_warps=(_threads(compiled) // 32) if _threads(compiled) else None, shared_bytes=shared,
                registers=registers, spill_bytes=spills, grid=_grid(compiled),
                constexprs={"threads": _threads(compiled)} if _threads(compiled) else {}, asm=asm,
                from_cache=nvcc.cached))
        return found, notes


def _raised_by_tilelang(exc: BaseException) -> bool:
    """The innermost frame is TileLang's or TVM's compiler, not the launch of a built kernel."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    if not frames or re.search(r"[/\\]tilelang[/\\]jit[/\\]adapter[/\\]", frames[-1].filename):
        return False  # a built kernel rejected its arguments at launch: a runtime error
    return bool(re.search(r"[/\\](tilelang|tvm)[/\\]", frames[-1].filename))


def _candidate_frames(exc: BaseException) -> str:
    """``line N: code`` for the candidate's own frames (its file is ``candidate.py`` in the worker)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith("candidate.py")]
    return "".join(f"line {f.lineno}: {(f.line or '').strip()}\n" for f in frames[-3:])


def _device_symbol(compiled: _Compiled) -> str:
    match = re.search(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(", compiled.kernel_source)
    return match.group(1) if match else f"{compiled.name}_kernel"


def _tilelang_nvcc_options() -> list[str]:
    """TileLang's own device flags (C++20, its templates and CUTLASS; no fast math unless asked)."""
    from tilelang.contrib.nvcc import default_compile_options

    return [*default_compile_options(), "-O3", "-lineinfo", "-w"]


def _trim_tilelang_error(text: str) -> str:
    """TileLang's error without the generated source it prepends or the C++ stack trace."""
    if "Compilation error:" in text:
        text = text.split("Compilation error:", 1)[1]
        return _nvcc.trim_nvcc_errors(text)
    lines = [ln for ln in text.splitlines() if ln.strip() and not re.match(r"\s*(\d+:|File \"|#\d)", ln)]
    return "\n".join(lines[-20:])[:3000]


PLUGIN = TileLangPlugin()
