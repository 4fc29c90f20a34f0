"""CUDA plug-in: candidates built with ``torch.utils.cpp_extension.load_inline`` (KernelBench's default).

The hook replaces ``load_inline`` before the candidate is imported. On a GPU it builds the
extension for real, in a build directory of its own (under the compile cache, keyed by the
sources, flags, device and versions, so a second screen of the same source does not rebuild),
and wraps the module so that every call of a bound function counts as a launch of the kernels
that function launches. SASS and ptxas resources come from the built library (cuobjdump).

Without a GPU the CUDA sources are compiled with nvcc for sm_90 (PTX, cubin, SASS, registers and
spills), with the headers and flags that ``load_inline`` would use, and the module becomes a
stand-in: its functions record launches and return NaN tensors, so forward can run dry for the
static checks. A build error is a ``compile_error`` with nvcc's messages, trimmed, either way.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgate import compile_cache
from kernelgate.integrity import compiler_section
from kernelgate.dsl import Launch, LaunchLog
from kernelgate.dsl import _nvcc
from kernelgate.dsl import cuda_facts
from kernelgate.models import KernelArtifact, Reason

__all__ = ["PLUGIN", "CudaPlugin", "CudaBuildError", "STATIC_ARCH"]

STATIC_ARCH = ["-gencode", "arch=compute_90,code=sm_90"]
"""Without a GPU: sm_90 (H100/H200), as torch builds extensions for that device."""

_IMPORT_RE = re.compile(r"\bload_inline\b")
_IMPLICIT_HEADERS = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
_GLOBAL_RE = re.compile(r"__global__\s+(?:void|[\w:<>]+)\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")


class CudaBuildError(RuntimeError):
    """The candidate's CUDA sources did not compile (nvcc's messages, trimmed)."""


@dataclass
class _Extension:
    """One ``load_inline`` call."""

    name: str
    cuda_source: str
    cpp_source: str
    functions: list[str]
    kernels: list[str]
    """``__global__`` functions in the CUDA source, in order."""
    launches_by_function: dict[str, list[str]] = field(default_factory=dict)
    """Kernels each bound function launches (``kernel<<<`` sites in its body)."""
    first_line: int | None = None
    """Line of the candidate file where the CUDA source's first line is (for error messages)."""
    build_dir: Path | None = None
    static: _nvcc.NvccResult | None = None
    cached: bool = False


def _source_line(path: str, cuda_sources: list[str]) -> int | None:
    """Where the first CUDA source string starts in the candidate file, if it is there verbatim."""
    if not cuda_sources:
        return None
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    at = text.find(cuda_sources[0])
    return None if at < 0 else text.count("\n", 0, at) + 1


def _candidate_lines(errors: str, ext: _Extension) -> str:
    """nvcc's ``cuda.cu(N)`` positions as lines of the candidate file (or of its CUDA source)."""
    def place(match: re.Match) -> str:
        line = int(match.group(1)) - len(_IMPLICIT_HEADERS)  # load_inline prepends three includes
        if ext.first_line is not None and line >= 1:
            return f"line {ext.first_line + line - 1}"
        return f"CUDA source line {line}"

    return re.sub(r"\b(?:candidate|cuda)\.cu\((\d+)\)", place, errors)


def _as_list(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _function_bodies(source: str, names: list[str]) -> dict[str, str]:
    """The brace-matched body of each named host function (best effort)."""
    bodies = {}
    for name in names:
        match = re.search(rf"\b{re.escape(name)}\s*\([^;{{]*\)\s*\{{", source)
        if not match:
            continue
        depth, i = 1, match.end()
        while i < len(source) and depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        bodies[name] = source[match.end():i]
    return bodies


def _launch_map(cuda_source: str, functions: list[str], kernels: list[str]) -> dict[str, list[str]]:
    bodies = _function_bodies(cuda_source, functions)
    found = {}
    for fn in functions:
        body = bodies.get(fn, "")
        launched = [k for k in kernels for _ in re.finditer(rf"\b{re.escape(k)}\s*(<\s*[^<>]*>\s*)?<<<", body)]
        found[fn] = launched or list(kernels[:1]) or [fn]  # no __global__ found: name the launch after the function
    return found


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses, brackets and template angle brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return [*parts, current.strip()] if current.strip() else parts


def _constant(source: str, expr: str) -> int | None:
    """An integer literal, a ``constexpr``/``const`` integer, a ``#define``, or a ``dim3`` of those."""
    expr = expr.strip()
    if re.fullmatch(r"\d+[uUlL]*", expr):
        return int(re.sub(r"[uUlL]", "", expr))
    if m := re.fullmatch(r"dim3\s*\((.*)\)", expr):
        dims = [_constant(source, d) for d in _split_top_level(m.group(1))]
        return None if None in dims else math.prod(dims)
    if re.fullmatch(r"\w+", expr):
        if m := re.search(rf"(?:constexpr|const)\s+[\w:]+\s+{expr}\s*=\s*(\d+)", source) or \
                re.search(rf"#define\s+{expr}\s+\(?(\d+)\)?", source):
            return int(m.group(1))
        if m := re.search(rf"dim3\s+{expr}\s*\(([^;]*)\)\s*;", source):
            return _constant(source, f"dim3({m.group(1)})")
    return None


def _threads_per_block(cuda_source: str, kernel: str) -> int | None:
    """Threads per block at the kernel's launch sites, when the source fixes it (all sites agree)."""
    found = set()
    for m in re.finditer(rf"\b{re.escape(kernel)}\s*(?:<[^;]*?>)?\s*<<<(.*?)>>>", cuda_source, re.DOTALL):
        args = _split_top_level(m.group(1))
        found.add(_constant(cuda_source, args[1]) if len(args) >= 2 else None)
    return found.pop() if len(found) == 1 else None


def _static_options(name: str, extra_cuda_cflags: list[str], extra_include_paths: list[str]) -> list[str]:
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths

    includes = [*include_paths(), sysconfig.get_paths()["include"], *extra_include_paths]
    return [*(f"-I{p}" for p in includes), f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
            "-D_GLIBCXX_USE_CXX11_ABI=1", *COMMON_NVCC_FLAGS, "-std=c++17", "-w", *extra_cuda_cflags]


def _cache_key(ext_name: str, kwargs: dict, device: str) -> str:
    import torch

    nvcc = _nvcc.find_nvcc()
    return compile_cache.CompileCache.key(
        kind="cuda-extension", name=ext_name, cpp=_as_list(kwargs.get("cpp_sources")),
        cuda=_as_list(kwargs.get("cuda_sources")), functions=kwargs.get("functions"),
        cflags=kwargs.get("extra_cflags"), cuda_cflags=kwargs.get("extra_cuda_cflags"),
        ldflags=kwargs.get("extra_ldflags"), includes=kwargs.get("extra_include_paths"),
        torch=torch.__version__, device=device, nvcc=_nvcc.nvcc_version(nvcc) if nvcc else None)


class _CountedModule:
    """The built extension with each bound function's calls counted as its kernels' launches."""

    def __init__(self, module, ext: _Extension, log: LaunchLog, *, stand_in: bool) -> None:
        self._module = module
        self._ext = ext
        self._log = log
        self._stand_in = stand_in

    def __getattr__(self, attr):
        target = None if self._stand_in else getattr(self._module, attr)
        if attr not in self._ext.functions and not self._stand_in:
            return target
        if self._stand_in and attr not in self._ext.functions:
            raise AttributeError(f"the extension {self._ext.name!r} binds no function {attr!r}")
        ext, log, stand_in = self._ext, self._log, self._stand_in

        def call(*args, **kwargs):
            for kernel in ext.launches_by_function.get(attr, []):
                log.record(kernel, Launch(ext, (), {"function": attr}, None))
            if stand_in or log.dry_run:
                if not log.dry_run:
                    raise RuntimeError("CUDA kernels cannot run without a GPU")
                return _nan_like_first_tensor(args)
            return target(*args, **kwargs)

        return call


def _nan_like_first_tensor(args):
    import torch

    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return torch.full((1,), float("nan")) if first is None else torch.full_like(first, float("nan"))


class CudaPlugin:
    name = "cuda"
    kernelbench_backend = "cuda"
    """KernelBench's name for this DSL (its ``backend`` argument), read by the adapter and the CLI."""
    cpu_numerics = False
    """No CUDA emulator on the CPU: without a GPU a candidate is compiled and checked statically."""
    facts = staticmethod(cuda_facts.facts)
    """DSL-neutral facts of one compiled kernel (pure text parsing), for the diagnosis rules."""
    hints = cuda_facts.HINTS
    """The fix for each finding code, in CUDA terms."""

    def __init__(self) -> None:
        self._extensions: dict[str, _Extension] = {}
        self._workdir: Path | None = None

    def detect(self, source: str) -> bool:
        return bool(_IMPORT_RE.search(source)) and "cpp_extension" in source

    def versions(self) -> dict[str, str]:
        nvcc = _nvcc.find_nvcc()
        return {"nvcc": _nvcc.nvcc_version(nvcc)} if nvcc else {}

    def prepare(self, *, interpret: bool) -> LaunchLog:
        import torch.utils.cpp_extension as cpp_extension

        log = LaunchLog()
        original = cpp_extension.load_inline
        plugin = self

        def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
            if args:  # positional use beyond the sources is rare; keep the real signature's order
                raise TypeError("kernelgate: pass load_inline's options by keyword")
            kwargs.update(cpp_sources=cpp_sources, cuda_sources=cuda_sources)
            ext = plugin._describe(name, kwargs)
            ext.first_line = _source_line(sys._getframe(1).f_code.co_filename, _as_list(cuda_sources))
            began = time.perf_counter()
            if interpret:
                with compiler_section():
                    ext.static = _nvcc.compile_static(ext.cuda_source, arch=STATIC_ARCH, label="cuda",
                                                      options=_static_options(
                                                          name, _as_list(kwargs.get("extra_cuda_cflags")),
                                                          _as_list(kwargs.get("extra_include_paths"))))
                if not ext.static.ok:
                    raise CudaBuildError(f"extension {name!r} did not compile:\n{_candidate_lines(ext.static.errors, ext)}")
                ext.cached = ext.static.cached
                module = None
            else:
                module = plugin._build(name, kwargs, ext, original)
            for kernel in ext.kernels:
                log.first_call_seconds.setdefault(kernel, time.perf_counter() - began)
            plugin._extensions[name] = ext
            return _CountedModule(module, ext, log, stand_in=interpret)

        cpp_extension.load_inline = load_inline
        return log

    def _describe(self, name: str, kwargs: dict) -> _Extension:
        cuda_source = "\n".join(_as_list(kwargs.get("cuda_sources")))
        cpp_source = "\n".join(_as_list(kwargs.get("cpp_sources")))
        functions = kwargs.get("functions")
        if isinstance(functions, dict):
            functions = list(functions)
        functions = _as_list(functions)
        kernels = list(dict.fromkeys(_GLOBAL_RE.findall(cuda_source)))
        if not kwargs.get("no_implicit_headers"):
            cuda_source = "\n".join(_IMPLICIT_HEADERS) + "\n" + cuda_source
        return _Extension(name=name, cuda_source=cuda_source, cpp_source=cpp_source, functions=functions,
                          kernels=kernels, launches_by_function=_launch_map(cuda_source, functions, kernels))

    def _build(self, name: str, kwargs: dict, ext: _Extension, original):
        import torch

        major, minor = torch.cuda.get_device_capability()
        cache = compile_cache.active()
        key = _cache_key(name, kwargs, f"sm_{major}{minor}")
        if cache is not None:
            build_dir = cache.directory("cuda-extension", key)
            ext.cached = any(build_dir.glob("*.so"))
        else:
            import tempfile

            build_dir = Path(tempfile.mkdtemp(prefix=f"kernelgate-ext-{name}-"))
        kwargs = dict(kwargs, build_directory=str(build_dir), verbose=False)
        ext.build_dir = build_dir
        try:
            with compiler_section():
                return original(name, **kwargs)
        except Exception as exc:
            errors = _nvcc.trim_nvcc_errors(str(exc), "cuda.cu")
            raise CudaBuildError(f"extension {name!r} did not build:\n{_candidate_lines(errors, ext)}") from None

    def classify_error(self, exc: BaseException) -> tuple[Reason, str] | None:
        chain: BaseException | None = exc
        while chain is not None:
            if isinstance(chain, CudaBuildError):
                return Reason.compile_error, str(chain)
            if "Error building extension" in str(chain):
                return Reason.compile_error, _nvcc.trim_nvcc_errors(str(chain), "cuda.cu")
            chain = chain.__cause__ or chain.__context__
        return None

    def artifacts(self, log: LaunchLog, source_path: Path, *, interpret: bool) -> tuple[list[KernelArtifact], list[str]]:
        notes: list[str] = []
        found: list[KernelArtifact] = []
        for ext in self._extensions.values():
            if interpret:
                result = ext.static
                target = "cuda:90"
            else:
                result, target = _from_built_library(ext), _device_target()
            if result is None or not result.ok:
                notes.append(f"no SASS for CUDA extension {ext.name}: {result.errors[:400] if result else 'no library'}")
            for kernel in ext.kernels:
                if kernel not in log.counts and kernel not in log.first:
                    continue
                asm = {"cuda": ext.cuda_source[:_nvcc.ASM_LIMIT_CHARS]}
                res = _nvcc.KernelResources()
                if result is not None and result.ok:
                    view, res = _nvcc.kernel_view(result, kernel, log.problem_dtype)
                    asm.update(view)
                threads = _threads_per_block(ext.cuda_source, kernel)
                found.append(KernelArtifact(
                    name=kernel, dsl="cuda", target=target, launches=log.counts.get(kernel, 0),
                    num_warps=-(-threads // 32) if threads else None,
                    shared_bytes=res.shared_bytes, registers=res.registers, spill_bytes=res.spill_bytes,
                    constexprs={"threads": threads} if threads else {}, asm=asm, from_cache=ext.cached))
        return found, notes


def _device_target() -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"cuda:{major}{minor}"


def _from_built_library(ext: _Extension) -> _nvcc.NvccResult | None:
    """SASS and per-kernel resources of the shared library torch built, through cuobjdump."""
    if ext.build_dir is None:
        return None
    libraries = sorted(ext.build_dir.glob("*.so"))
    cuobjdump = _nvcc._find_cuobjdump()
    if not libraries or cuobjdump is None:
        return None
    library = str(libraries[0])
    sass = subprocess.run([cuobjdump, "--dump-sass", library], capture_output=True, text=True, timeout=120)
    usage = subprocess.run([cuobjdump, "--dump-resource-usage", library], capture_output=True, text=True, timeout=120)
    ptx = subprocess.run([cuobjdump, "--dump-ptx", library], capture_output=True, text=True, timeout=120)
    resources = {}
    for match in re.finditer(r"Function (\S+):\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", usage.stdout):
        resources[match.group(1)] = _nvcc.KernelResources(
            registers=int(match.group(2)), stack_bytes=int(match.group(3)), shared_bytes=int(match.group(4)),
            spill_bytes=int(match.group(5)))  # local memory per thread: spills and local arrays
    ok = sass.returncode == 0
    return _nvcc.NvccResult(ok=ok, ptx=ptx.stdout[:_nvcc.ASM_LIMIT_CHARS] if ptx.returncode == 0 else "",
                            sass=sass.stdout[:_nvcc.ASM_LIMIT_CHARS], resources=resources,
                            errors="" if ok else sass.stderr[-400:], cached=ext.cached)


PLUGIN = CudaPlugin()
