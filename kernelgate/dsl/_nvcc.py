"""nvcc as a static-analysis tool: CUDA source to PTX, cubin and SASS, with ptxas resources.

Used by the TileLang plug-in (its generated CUDA) and the CUDA plug-in (``load_inline`` sources),
on a GPU machine and without one alike: nothing here runs a kernel. Results are cached by
``kernelgate.compile_cache`` under a key of source, flags, architecture and nvcc version.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelgate import compile_cache

__all__ = ["NvccResult", "KernelResources", "find_nvcc", "nvcc_version", "compile_static", "trim_nvcc_errors",
           "GENCODE_SM90A"]

GENCODE_SM90A = ["-gencode", "arch=compute_90a,code=sm_90a"]
"""sm_90a: Hopper's own instructions (wgmma, setmaxnreg, TMA) are allowed, as on an H100/H200."""

NVCC_TIMEOUT_S = 240
ASM_LIMIT_CHARS = 200_000


@dataclass
class KernelResources:
    """What ptxas says about one kernel (``-Xptxas -v``)."""

    registers: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None


@dataclass
class NvccResult:
    ok: bool
    ptx: str = ""
    sass: str = ""
    resources: dict[str, KernelResources] = field(default_factory=dict)
    """By mangled kernel name, as ptxas prints it."""
    errors: str = ""
    """Trimmed compiler messages when ``ok`` is False."""
    seconds: float = 0.0
    """Compile time (0 when the result came from the cache)."""
    cached: bool = False

    def resources_for(self, name: str) -> KernelResources:
        """Resources of a kernel by its source name (matched inside mangled names)."""
        if name in self.resources:
            return self.resources[name]
        for mangled, res in self.resources.items():
            if re.search(rf"(^|\d){re.escape(name)}(\d|I|E|$|_)", mangled) or mangled.endswith(name):
                return res
        return KernelResources()


def find_nvcc() -> str | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return str(Path(candidate) / "bin" / "nvcc")
    return shutil.which("nvcc")


def _find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(bundled) if bundled.exists() else None
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"release ([\d.]+), V([\d.]+)", proc.stdout)
    return match.group(2) if match else proc.stdout.strip()[-40:]


_RES_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_RES_FUNC = re.compile(r"Function properties for (\S+)")


def parse_ptxas(text: str) -> dict[str, KernelResources]:
    """Registers, spills, shared memory and stack per kernel from ``ptxas -v`` output."""
    found: dict[str, KernelResources] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _RES_ENTRY.search(line) or _RES_FUNC.search(line):
            current = m.group(1)
            found.setdefault(current, KernelResources())
            continue
        if current is None:
            continue
        res = found[current]
        if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            res.stack_bytes = int(m.group(1))
            res.spill_bytes = int(m.group(2)) + int(m.group(3))
        if m := re.search(r"Used (\d+) registers", line):
            res.registers = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            res.shared_bytes = int(smem.group(1)) if smem else 0
    return found


def trim_nvcc_errors(text: str, source_name: str = "candidate.cu", limit: int = 25) -> str:
    """The compiler's error lines (and the line after each), without include chains and noise."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|: fatal|undefined reference|ptxas .*error", line, re.IGNORECASE):
            keep.append(line)
            if i + 1 < len(lines) and not re.search(r"\berror\b", lines[i + 1]) and len(lines[i + 1]) < 300:
                keep.append("  " + lines[i + 1].strip())
    if not keep:
        keep = lines[-limit:]
    text = "\n".join(keep[:limit])
    return re.sub(r"/\S*/(" + re.escape(source_name) + r")", r"\1", text)[:3000]


def compile_static(code: str, *, options: list[str], arch: list[str] = GENCODE_SM90A,
                   source_name: str = "candidate.cu", label: str = "cuda") -> NvccResult:
    """Compile ``code`` to PTX and cubin for ``arch``; SASS through cuobjdump. Nothing is run."""
    nvcc = find_nvcc()
    if nvcc is None:
        return NvccResult(ok=False, errors="nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    cache = compile_cache.active()
    key = compile_cache.CompileCache.key(kind=f"nvcc-static-{label}", code=code, options=options, arch=arch,
                                         nvcc=nvcc_version(nvcc))
    if cache is not None and (entry := cache.get(key)) is not None:
        result = NvccResult(**{**entry, "resources": {k: KernelResources(**v) for k, v in entry["resources"].items()}})
        result.cached, result.seconds = True, 0.0
        return result
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kernelgate-nvcc-") as tmp:
        src = Path(tmp) / source_name
        src.write_text(code)
        cubin = Path(tmp) / "k.cubin"
        keep = Path(tmp) / "keep"  # one nvcc run: the cubin, and the PTX kept as an intermediate
        keep.mkdir()
        proc = subprocess.run([nvcc, *arch, *options, "--cubin", "-Xptxas", "-v", "--keep", "--keep-dir", str(keep),
                               "-o", str(cubin), str(src)], capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        if proc.returncode != 0:
            return NvccResult(ok=False, errors=trim_nvcc_errors(proc.stdout + proc.stderr, source_name),
                              seconds=time.perf_counter() - began)
        ptx = "\n".join(p.read_text() for p in sorted(keep.glob("*.ptx")))
        sass = ""
        if (cuobjdump := _find_cuobjdump()) is not None:
            dump = subprocess.run([cuobjdump, "--dump-sass", str(cubin)], capture_output=True, text=True, timeout=120)
            sass = dump.stdout if dump.returncode == 0 else ""
        result = NvccResult(ok=True, ptx=ptx[:ASM_LIMIT_CHARS], sass=sass[:ASM_LIMIT_CHARS],
                            resources=parse_ptxas(proc.stdout + proc.stderr),
                            seconds=time.perf_counter() - began)
    if cache is not None:
        entry = asdict(result)
        entry.pop("cached")
        cache.put(key, entry)
    return result


_ITANIUM_TYPE = {"float32": "f", "float64": "d", "float16": "N3c104HalfE", "bfloat16": "N3c108BFloat16E"}
"""How a template argument of each dtype appears in a mangled kernel name (``rowsum<float>``: ``IfE``)."""


def _mangled_matches(mangled: str, kernel: str) -> bool:
    return mangled == kernel or bool(re.search(rf"(^_Z|\d){len(kernel)}{re.escape(kernel)}", mangled)) \
        or mangled.endswith(kernel)


def pick_entries(mangled_names: list[str], kernel: str, dtype: str | None) -> list[str]:
    """The compiled entries of ``kernel``; of a template, the instantiation for ``dtype`` when there is one.

    ``AT_DISPATCH_FLOATING_TYPES`` instantiates a kernel for double as well: its fp64 code is not
    what runs for an fp32 problem, and must not be diagnosed as if it were.
    """
    mine = [m for m in mangled_names if _mangled_matches(m, kernel)]
    if dtype and len(mine) > 1 and dtype in _ITANIUM_TYPE:
        code = _ITANIUM_TYPE[dtype]
        typed = [m for m in mine if f"I{code}" in m]
        if typed:
            return typed
    return mine


def split_ptx(ptx: str) -> dict[str, str]:
    """PTX text of each ``.entry``, by mangled name."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+(\w+)\s*\(", ptx,
                                                            re.MULTILINE)]
    blocks = {}
    for i, (pos, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        blocks[name] = ptx[pos:end]
    return blocks


def split_sass(sass: str) -> dict[str, str]:
    """cuobjdump SASS of each function, by mangled name."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"Function : (\S+)", sass)]
    return {name: sass[pos:(starts[i + 1][0] if i + 1 < len(starts) else len(sass))]
            for i, (pos, name) in enumerate(starts)}


def kernel_view(result: NvccResult, kernel: str, dtype: str | None) -> tuple[dict[str, str], KernelResources]:
    """PTX, SASS and resources of one kernel (its dtype's instantiation) out of a whole compile."""
    ptx_blocks, sass_blocks = split_ptx(result.ptx), split_sass(result.sass)
    names = list(dict.fromkeys([*ptx_blocks, *sass_blocks, *result.resources]))
    chosen = pick_entries(names, kernel, dtype)
    asm = {}
    if ptx_blocks:
        header = "\n".join(re.findall(r"^\s*\.(?:version|target|address_size)\b.*$", result.ptx, re.MULTILINE)[:3])
        body = "\n".join(ptx_blocks[n] for n in chosen if n in ptx_blocks)
        asm["ptx"] = f"{header}\n{body}" if body else result.ptx
    if sass_blocks:
        asm["sass"] = "\n".join(sass_blocks[n] for n in chosen if n in sass_blocks) or result.sass
    res = next((result.resources[n] for n in chosen if n in result.resources), None)
    return asm, res or result.resources_for(kernel)
