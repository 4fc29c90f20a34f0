"""Static diagnosis: authoring defects visible in the compiled artifacts of the launched kernels.

Each rule looks at one ``KernelArtifact`` (and the problem's cost) and may return a ``Finding``
with its evidence and a fix hint in the kernel's own DSL. Rules work the same on artifacts from a
GPU run and on ahead-of-time artifacts compiled without one. What each rule reads:

=======================  ===================================================================
code                     signal
=======================  ===================================================================
serial_reduction         (memory-bound problems) Triton TTGIR: an ``scf.for`` carrying a scalar
                         float fed by a scalar load or a ``tt.reduce`` over <= 1 element per
                         thread; TileLang CUDA: a loop updating ``acc[0]`` and no
                         ``tl::AllReduce``; CUDA: a loop adding into a float scalar and no
                         shuffle, barrier or atomic in the kernel's PTX
replicated_fragment      TileLang CUDA: a per-thread array of >= 64 elements filled from global
                         memory without ``threadIdx`` (or reduced whole, no AllReduce)
tiny_block               threads < 32, or one warp on blocks of <= 64 elements
scalar_global_loads      PTX: ``ld.global`` but no ``.v2/.v4`` load
uncoalesced_access       Triton TTGIR: a load offset by ``tl.arange * stride`` along the
                         layout's fastest dim; TileLang/CUDA: ``threadIdx.x * C`` in a global
                         index, C elements >= 128 bytes (or a variable)
idle_threads             (grid >= SMs) Triton TTGIR: no tensor as large as the program's
                         threads; TileLang: ``if (threadIdx.x < K)`` with no ``else``
too_few_blocks           grid < SMs on a problem of > 64 MiB
register_spills          ptxas spill bytes
no_tensor_cores          GEMM-like cost, 16-bit: no mma/wgmma in the PTX/SASS
no_shared_memory_tiling  GEMM-like cost: no shared memory
no_pipelining            a ``tl.dot`` K loop with ``num_stages <= 1`` or no cp.async/TMA; a
                         TileLang tensor-core K loop with no cp.async/TMA; CUDA: an mma loop
                         with two barriers per iteration and no cp.async
small_tiles              Triton: a ``tl.dot`` tile <= 64x64 where 128x128 tiles would still
                         give every SM one
dtype_round_trip         Triton TTGIR: ``truncf`` whose result is ``extf``-ed back; PTX: a
                         narrowing ``cvt`` whose register is widened straight back
fp64_arithmetic          PTX: fp64 arithmetic >= 10% of the floating-point arithmetic
extra_passes             (all kernels) >= 3 launches per call on a memory-bound problem
=======================  ===================================================================

Host-side copies in the wrapper (``.contiguous()``, ``.float()``) launch ATen kernels that no
DSL artifact records; seeing them needs the kernel list of a profiled GPU call.
"""

from __future__ import annotations

import math
import re

from kernelgate.models import Cost, Finding, KernelArtifact

__all__ = ["diagnose", "RULES", "DEFAULT_SM_COUNT"]

DEFAULT_SM_COUNT = 132
"""SMs of an H100/H200 SXM: the sm_90 target of ahead-of-time artifacts."""

_VECTOR_LOAD = re.compile(r"ld\.global(?:\.\w+)*\.v[248]\.")
_ANY_LOAD = re.compile(r"ld\.global")
_TENSOR_CORE = re.compile(r"\b(?:mma\.sync|wgmma\.mma_async|HMMA|HGMMA)\b")
_ARITH = r"\b(?:add|sub|mul|fma|mad|div|sqrt|rsqrt|rcp|neg|abs|min|max)(?:\.\w+)*"
_F64_ARITH = re.compile(_ARITH + r"\.f64\b")
_F32_ARITH = re.compile(_ARITH + r"\.f32\b")
FP64_SHARE = 0.1
"""fp64 arithmetic is a finding when it is at least this share of the floating-point arithmetic:
a per-row ``1 / sqrt(double)`` or a conversion of a double argument is not the defect, fp64
accumulation in the main loop is."""

REDUCTION_INTENSITY = 2.0
"""Serial reductions are judged on problems of at most this many flops per compulsory byte (sums,
norms, softmax: 0.25-1.5); above it (matmul, even at small test shapes) one thread's loop over K
is the normal form of the computation, and other rules speak to it."""

REPLICATED_MIN_ELEMENTS = 64
"""A per-thread array this long that every thread fills alike is a replicated tile, not a few
broadcast scalars (a row's shift, a mean)."""

STRIDE_MIN_BYTES = 128
"""Adjacent threads this far apart touch a different 128-byte line each: a warp-wide access
moves 32 lines for 32 useful elements."""

LANE_STRIDE_MIN_ELEMENTS = 16
"""Triton: a ``tl.arange`` multiplied by a constant at least this large is a lane stride."""

SMALL_TILE_ELEMENTS = 64 * 64
"""``tl.dot`` output tiles of at most this many elements re-read each operand element N/64 times."""

LARGE_TILE_ELEMENTS = 128 * 128
"""The tile a GEMM should use when the problem still gives every SM one at this size."""

COMPUTE_BOUND_INTENSITY = 64.0
"""FLOP per compulsory byte above which a problem is a tensor-core GEMM or convolution at heart (an
H200 turns compute-bound near 160 in fp16): where the kind of MMA instruction matters."""

_HINTS = {
    "scalar_global_loads": {
        "triton": "load contiguous blocks (tl.arange over a BLOCK of 4+ elements per thread) so the compiler "
                  "emits 16-byte vector loads",
        "tilelang": "copy whole tiles with T.copy into shared memory or fragments (contiguous last dim), so the "
                    "generated code uses 16-byte vector loads",
        "cuda": "have each thread load 16 bytes at a time (float4 / reinterpret_cast of aligned pointers), "
                "consecutive threads on consecutive addresses",
    },
    "no_tensor_cores": {
        "triton": "compute tiles with tl.dot on fp16/bf16 operands so the compiler uses tensor cores",
        "tilelang": "compute tiles with T.gemm on fp16/bf16 operands staged in shared memory",
        "cuda": "use tensor cores (mma.sync / WMMA fragments, or wgmma on sm_90a) for the tile products",
    },
    "no_shared_memory_tiling": {
        "triton": "tile the output (e.g. 128x128 per program) and accumulate tl.dot over K blocks so operands "
                  "are staged and reused",
        "tilelang": "tile the output (e.g. 128x128 per block), T.copy A and B tiles into T.alloc_shared buffers "
                    "inside T.Pipelined over K, and T.gemm them",
        "cuda": "stage A and B tiles in __shared__ memory and compute a register tile per thread from them, "
                "so each operand is read from global memory once per tile",
    },
    "tiny_block": {
        "triton": "use blocks of 1024+ elements (a power of two) and 4-8 warps so each program moves wide vectors",
        "tilelang": "use 128-256 threads per block and tiles of 1024+ elements",
        "cuda": "launch 128-256 threads per block, each handling a vector of elements",
    },
    "serial_reduction": {
        "triton": "accumulate lane-wise into a vector (acc = tl.zeros([BLOCK], tl.float32); acc += x) over "
                  "BLOCK-wide chunks of 1024+ elements, and reduce once with tl.sum / tl.max after the loop",
        "tilelang": "give the row to the whole block: T.copy or T.Parallel it into a fragment, accumulate "
                    "element-wise, and reduce once with T.reduce_sum / T.reduce_max (a warp-shuffle tree)",
        "cuda": "let the block's threads stride across the row with coalesced loads, then combine their partial "
                "sums with __shfl_xor_sync within each warp and one shared-memory step across warps",
    },
    "replicated_fragment": {
        "triton": "spread the tile over the program's threads with tl.arange and reduce with tl.sum",
        "tilelang": "let T.Parallel or T.copy distribute the fragment over the threads (block_m = 1 for odd row "
                    "lengths, outer T.serial over rows, inner T.Parallel over columns) and reduce it with "
                    "T.reduce_sum instead of a T.serial loop over the fragment",
        "cuda": "give each thread its own slice of the tile (index with threadIdx.x) and combine with shuffles",
    },
    "uncoalesced_access": {
        "triton": "put the contiguous dimension on tl.arange (offsets + tl.arange(0, BLOCK) along the row) and loop "
                  "over the strided one, or load a 2-D tile whose last dim is contiguous",
        "tilelang": "map threads to the contiguous (last) dimension: T.copy or T.Parallel over a tile of columns, "
                    "with the strided dimension in an outer T.serial loop",
        "cuda": "make consecutive threads read consecutive addresses (index with threadIdx.x along the "
                "contiguous dimension) and loop over the strided one",
    },
    "idle_threads": {
        "triton": "match num_warps to the block: num_warps * 32 <= BLOCK (e.g. BLOCK 1024 on 4-8 warps), or "
                  "raise BLOCK",
        "tilelang": "give every thread work: threads = tile elements / elements per thread (e.g. 128 threads for "
                    "a 1024-element tile with 8 per thread), or enlarge the tile",
        "cuda": "launch as many threads per block as there are elements to process in it",
    },
    "no_pipelining": {
        "triton": "software-pipeline the K loop: num_stages=3-4 so loads of later K slices overlap tl.dot",
        "tilelang": "iterate K with T.Pipelined(..., num_stages=2-3) so the T.copy of the next slices "
                    "(cp.async / TMA) overlaps T.gemm",
        "cuda": "double-buffer the shared tiles with cp.async (cuda::memcpy_async / cp.async.cg) so the next K "
                "slice loads while the current one is multiplied",
    },
    "warp_level_mma": {
        "triton": "use tiles of at least 64 rows per warpgroup (e.g. 128x128 with 4-8 warps) so tl.dot lowers to "
                  "wgmma",
        "tilelang": "use block tiles of at least 64x64 per warpgroup (e.g. block_M=128, block_N=128, 128+ threads) "
                    "so T.gemm lowers to Hopper's wgmma",
        "cuda": "use wgmma.mma_async (CUTLASS 3 / CuTe) with 64-row warpgroup tiles instead of mma.sync/wmma",
    },
    "small_tiles": {
        "triton": "use 128x128 (or 128x256) output tiles with BLOCK_K 32-64, 8 warps and 3-4 stages, or "
                  "@triton.autotune over such configs keyed on M, N, K",
        "tilelang": "use 128x128 or 128x256 block tiles (autotune over block_M/N/K and num_stages)",
        "cuda": "compute a 128x128 block tile with a register tile of 8x8 per thread",
    },
    "dtype_round_trip": {
        "triton": "convert once: keep the value in fp32 (x.to(tl.float32)) until the final store, without "
                  ".to(fp16/bf16).to(fp32) in between",
        "tilelang": "cast once into an fp32 fragment (T.Cast / T.copy into an accum_dtype buffer) and cast back "
                    "only on the final store",
        "cuda": "convert each element once (static_cast<float> on load, back on store); keep intermediates in "
                "float",
    },
}


def _hint(code: str, dsl: str) -> str:
    """The fix for ``code`` in the candidate's own DSL."""
    by_dsl = _HINTS[code]
    return by_dsl.get(dsl, by_dsl["triton"])


def _finding(code: str, k: KernelArtifact, evidence: str) -> Finding:
    return Finding(code=code, kind="repairable", kernel=k.name, evidence=evidence, hint=_hint(code, k.dsl))


def _quote(line: str, limit: int = 160) -> str:
    """An artifact line as evidence: trimmed, cut to ``limit`` characters."""
    text = " ".join(line.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _intensity(cost: Cost | None) -> float | None:
    if cost is None or cost.bytes_compulsory <= 0:
        return None
    return cost.flops / cost.bytes_compulsory


def _threads(k: KernelArtifact) -> int | None:
    threads = k.constexprs.get("threads")
    if isinstance(threads, int) and threads > 0:
        return threads
    return k.num_warps * 32 if k.num_warps else None


def _programs(k: KernelArtifact) -> int:
    programs = 1
    for g in k.grid or [0]:
        programs *= max(0, g)
    return programs


# --- reading the artifacts -------------------------------------------------------------------
#
# Triton TTGIR is MLIR text: one op per line, ``%name = op operands : types loc(#locN)``, regions
# in braces, and a table of ``#locN = loc(...)`` lines that lead back to candidate lines.
# Generated CUDA (TileLang) and CUDA sources are read as C text, a brace-matched block at a time.


def _block(lines: list[str], start: int) -> list[str]:
    """``lines[start]`` and what follows up to the brace that closes the region it opens."""
    depth, opened = 0, False
    for end in range(start, len(lines)):
        for ch in lines[end]:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:  # `} else {` closes the region on its line
                    return lines[start:end + 1]
    return lines[start:]


_LOC_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)\s*$", re.MULTILINE)


def _loc_table(ttgir: str) -> dict[str, str]:
    return dict(_LOC_DEF.findall(ttgir))


def _source_line(table: dict[str, str], line: str) -> int | None:
    """The candidate line an op comes from (through names and call sites), or None."""
    match = re.search(r"loc\(#(loc\d*)\)\s*$", line)
    return _resolve_loc(table, match.group(1), 0) if match else None


def _resolve_loc(table: dict[str, str], ref: str, depth: int) -> int | None:
    body = table.get(ref)
    if body is None or depth > 32:
        return None
    if m := re.fullmatch(r'"([^"]*)":(\d+):\d+', body):
        path = m.group(1)
        own = "site-packages" not in path and "/triton/" not in path and not path.startswith("<")
        return int(m.group(2)) if own else None
    if m := re.fullmatch(r"callsite\(#(loc\d*) at #(loc\d*)\)", body):  # callee at caller: the caller is ours
        return _resolve_loc(table, m.group(2), depth + 1) or _resolve_loc(table, m.group(1), depth + 1)
    if m := re.fullmatch(r'"[^"]*"\(#(loc\d*)\)', body):
        return _resolve_loc(table, m.group(1), depth + 1)
    return None


def _at(line: int | None) -> str:
    return f"line {line}: " if line else ""


def _ttgir_lines(k: KernelArtifact) -> list[str]:
    return [ln for ln in k.asm.get("ttgir", "").splitlines() if ln.strip() and not ln.startswith("#")]


_TENSOR = re.compile(r"tensor<((?:\d+x)+)")
_SCALAR_FLOAT = {"f16", "bf16", "f32", "f64"}


def _elements(dims: str) -> int:
    return math.prod(int(d) for d in dims.rstrip("x").split("x"))


def _ttgir_defs(lines: list[str]) -> dict[str, str]:
    """Each SSA value's defining line."""
    defs = {}
    for ln in lines:
        if m := re.match(r"\s*(%[\w.]+)(?::\d+)? = ", ln):
            defs[m.group(1)] = ln
    return defs


def _ttgir_op(line: str) -> tuple[str, list[str]]:
    """Op name and SSA operands of a TTGIR line (types and location left out)."""
    rhs = line.split(" = ", 1)[1] if " = " in line else line.strip()
    op = rhs.split(None, 1)[0].strip('"')
    head = rhs.split(" : ", 1)[0]
    return op, re.findall(r"%[\w.]+", head)


def _cuda_kernel_body(source: str, name: str) -> list[str]:
    """Lines of the ``__global__`` function ``name`` in a CUDA source (its definition, not a declaration)."""
    lines = source.splitlines()
    for i, ln in enumerate(lines):
        if "__global__" in ln or (i and "__global__" in lines[i - 1]):
            if re.search(rf"\b{re.escape(name)}\s*\(", ln) and not ln.rstrip().endswith(";"):
                return _block(lines, i)
    return []


def _cuda_loops(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Each ``for`` loop: its header line and its body (braced block, or the one statement after it)."""
    loops = []
    for i, ln in enumerate(lines):
        m = re.match(r"\s*for\s*\(", ln)
        if not m:
            continue
        depth, j = 1, m.end()
        while j < len(ln) and depth:
            depth += {"(": 1, ")": -1}.get(ln[j], 0)
            j += 1
        tail = ln[j:].strip()
        if tail.startswith("{") or (not tail and i + 1 < len(lines) and lines[i + 1].strip().startswith("{")):
            loops.append((ln, _block(lines, i if tail else i + 1)[1:] or [tail]))  # `{ ... }` on one line
        elif tail:
            loops.append((ln, [tail]))
        elif i + 1 < len(lines):
            loops.append((ln, [lines[i + 1]]))
    return loops


def _ptx_has(k: KernelArtifact, pattern: str) -> bool:
    return re.search(pattern, k.asm.get("ptx", "")) is not None


_CROSS_THREAD = r"\bshfl\.sync|\bbar\.sync|\bbarrier\.sync|\batom\.|\bred\.|\bredux\.sync"


# --- per-kernel rules ------------------------------------------------------------------------


def _tiny_block(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    threads = k.constexprs.get("threads")
    if isinstance(threads, int) and threads < 32:
        return Finding(code="tiny_block", kind="repairable", kernel=k.name,
                       evidence=f"{threads} thread(s) per block: {32 - threads} of 32 lanes of each warp idle",
                       hint=_hint("tiny_block", k.dsl))
    blocks = [v for n, v in k.constexprs.items() if n.upper().startswith("BLOCK") and isinstance(v, int)]
    if k.num_warps == 1 and blocks and max(blocks) <= 64:
        return Finding(code="tiny_block", kind="repairable", kernel=k.name,
                       evidence=f"num_warps=1, block sizes {blocks}",
                       hint=_hint("tiny_block", k.dsl))
    return None


def _scalar_loads(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    ptx = k.asm.get("ptx", "")
    loads = len(_ANY_LOAD.findall(ptx))
    if loads and not _VECTOR_LOAD.search(ptx):
        return Finding(code="scalar_global_loads", kind="repairable", kernel=k.name,
                       evidence=f"{loads} ld.global in the PTX, none vectorized (.v2/.v4)",
                       hint=_hint("scalar_global_loads", k.dsl))
    return None


def _too_few_blocks(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    if not k.grid:
        return None
    programs = 1
    for g in k.grid:
        programs *= max(1, g)
    big = cost is not None and cost.bytes_compulsory > 64 * (1 << 20)
    if programs < sm_count and big:
        return Finding(code="too_few_blocks", kind="repairable", kernel=k.name,
                       evidence=f"grid {k.grid} = {programs} programs for {sm_count} SMs",
                       hint="split each row (or the reduction) over several programs, e.g. partial results in a "
                            "first kernel and a small combine, so every SM has work")
    return None


def _spills(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    if k.spill_bytes:
        return Finding(code="register_spills", kind="repairable", kernel=k.name,
                       evidence=f"{k.spill_bytes} bytes of spill stores/loads, {k.registers} registers",
                       hint="shrink the block or the number of live values per thread, or raise num_warps")
    return None


def _matmul_without_tiles(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    intensive = cost is not None and cost.bytes_compulsory > 0 and cost.flops / cost.bytes_compulsory > 32
    if not intensive:
        return None
    ptx, sass = k.asm.get("ptx", ""), k.asm.get("sass", "")
    if cost.math_mode.value in ("fp16", "bf16") and not _TENSOR_CORE.search(ptx + sass):
        return Finding(code="no_tensor_cores", kind="repairable", kernel=k.name,
                       evidence="no mma/wgmma instruction in the PTX/SASS of a GEMM-like kernel",
                       hint=_hint("no_tensor_cores", k.dsl))
    if not k.shared_bytes:
        return Finding(code="no_shared_memory_tiling", kind="repairable", kernel=k.name,
                       evidence="0 bytes of shared memory in a GEMM-like kernel: operands are re-read from memory",
                       hint=_hint("no_shared_memory_tiling", k.dsl))
    return None


def _fp64(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    ptx = k.asm.get("ptx", "")
    f64, f32 = len(_F64_ARITH.findall(ptx)), len(_F32_ARITH.findall(ptx))
    if f64 and cost is not None and f64 >= FP64_SHARE * (f64 + f32):
        return Finding(code="fp64_arithmetic", kind="repairable", kernel=k.name,
                       evidence=f"{f64} fp64 arithmetic instructions in the PTX (and {f32} fp32)",
                       hint="keep accumulators in fp32; fp64 runs at a fraction of the fp32 rate")
    return None


# --- serial_reduction ------------------------------------------------------------------------


def _serial_reduction(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """A reduction walked by a loop into a per-thread scalar instead of a tree across threads."""
    intensity = _intensity(cost)
    if intensity is None or intensity > REDUCTION_INTENSITY:
        return None
    if "ttgir" in k.asm:
        evidence = _serial_reduction_ttgir(k)
    elif k.dsl == "tilelang" and "cuda" in k.asm:
        evidence = _serial_reduction_generated_cuda(k.asm["cuda"])
    elif k.dsl == "cuda" and "cuda" in k.asm and "ptx" in k.asm:
        evidence = None if _ptx_has(k, _CROSS_THREAD) else _serial_reduction_cuda_source(k)
    else:
        evidence = None
    return _finding("serial_reduction", k, evidence) if evidence else None


def _serial_reduction_ttgir(k: KernelArtifact) -> str | None:
    """An ``scf.for`` carrying a scalar float, fed by a scalar load or a reduction over <= 1 element per thread."""
    lines, table = _ttgir_lines(k), _loc_table(k.asm["ttgir"])
    threads = _threads(k) or 32
    for i, ln in enumerate(lines):
        m = re.search(r"= scf\.for\b.*->\s*\(([^)]*)\)", ln)
        if not m or not _SCALAR_FLOAT & {t.strip() for t in m.group(1).split(",")}:
            continue
        region = _block(lines, i)
        where = _at(_source_line(table, region[-1]))
        for body in region[1:]:
            reduce = re.search(r"^\s*\}\) : \(tensor<((?:\d+x)+)(\w+)[^)]*\) -> (f16|bf16|f32|f64)\b", body)
            if reduce and _elements(reduce.group(1)) <= threads:
                n = _elements(reduce.group(1))
                return (f"{where}the loop carries a scalar {reduce.group(3)} and reduces a {n}-element tensor into it "
                        f"every iteration ({n} elements on {threads} threads): a chain of dependent tree "
                        f"reductions")
            load = re.search(r"= tt\.load %[\w.]+(?:, %[\w.]+)* : !tt\.ptr<(\w+)>", body)
            if load:
                return (f"{where}the loop adds one scalar {load.group(1)} load per iteration into a scalar "
                        f"({_quote(ln, 90)})")
    return None


_ALL_REDUCE = re.compile(r"AllReduce|__shfl|shfl_|warp_reduce|atomicAdd|AtomicAdd|tl::reduce|cub::")


def _serial_reduction_generated_cuda(source: str) -> str | None:
    """A loop updating ``acc[0]`` from itself, in a kernel with no cross-thread reduction."""
    if _ALL_REDUCE.search(source):
        return None
    found = [(len(body), header, ln, m.group(1)) for header, body in _cuda_loops(source.splitlines()) for ln in body
             if (m := re.match(r"\s*(\w+)\[0\] = .*\b\1\[0\]", ln))]
    if not found:
        return None
    _, header, ln, name = min(found, key=lambda f: f[0])  # the innermost loop around the update
    return (f"`{_quote(header, 60)}` updates {name}[0] from itself every iteration (`{_quote(ln, 90)}`), and no "
            f"tl::AllReduce follows: one thread walks the reduction")


_SCALAR_UPDATE = re.compile(r"(?<![\w.\]\[])([A-Za-z_]\w*)\s*"
                            r"(?:\+=|-=|\*=|=\s*(?:fmaxf?|fminf?|max|min|fmaf?)\s*\(\s*\1\b|=\s*\1\s*[+*])")
_INTEGER_TYPE = re.compile(r"^(?:const\s+)?(?:unsigned|signed|int|long|short|char|bool|size_t|u?int\d+_t|"
                           r"(?:unsigned\s+)?(?:int|long))$")


def _float_scalar(body: list[str], name: str) -> bool:
    """``name`` is declared in the kernel as a non-integer, non-pointer, non-array value."""
    text = "\n".join(body)
    for m in re.finditer(rf"([\w:<>]+(?:\s+const)?)\s+(\*?)\s*{re.escape(name)}\s*(=|;|\[|,|\))", text):
        if m.group(2) or m.group(3) == "[":
            return False
        return not _INTEGER_TYPE.match(m.group(1)) and m.group(1) not in ("return", "else")
    return False


def _serial_reduction_cuda_source(k: KernelArtifact) -> str | None:
    """A ``for`` loop adding into a scalar, in a kernel whose PTX has no shuffle, barrier or atomic."""
    body = _cuda_kernel_body(k.asm["cuda"], k.name)
    for header, loop in _cuda_loops(body):
        for m in _SCALAR_UPDATE.finditer(" ".join(loop)):
            if _float_scalar(body, m.group(1)):
                return (f"`{_quote(header, 110)}` accumulates into the scalar {m.group(1)}; the kernel has no "
                        f"shuffle, barrier or atomic (PTX): each thread reduces alone")
    return None


# --- replicated_fragment ---------------------------------------------------------------------


_LOCAL_ARRAY = re.compile(r"^\s*(?:float|double|half_t|bfloat16_t|half|int|float4|uint4)\s+(\w+)\[(\d+)\];")
_GLOBAL_PARAM = re.compile(r"(?:const\s+)?(\w+)\*\s*__restrict__\s+(\w+)")


def _replicated_fragment(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """TileLang: a per-thread copy of a whole tile, filled or reduced identically by every thread."""
    source = k.asm.get("cuda", "")
    threads = _threads(k)
    if k.dsl != "tilelang" or not source or not threads or threads < 64:
        return None
    lines = source.splitlines()
    params = {name for _, name in _GLOBAL_PARAM.findall(source)}
    all_reduce = _ALL_REDUCE.search(source) is not None
    for decl in lines:
        m = _LOCAL_ARRAY.match(decl)
        if not m or int(m.group(2)) < REPLICATED_MIN_ELEMENTS:
            continue
        name, length = m.group(1), int(m.group(2))
        fill = re.compile(rf"^\s*(?:\*\([\w\s*]+\)\(\s*{name}\b[^=]*|{name}\[[^=]*)=(?!=)(.*)$")
        for ln in lines:
            fills = fill.match(ln)
            if fills and "threadIdx" not in fills.group(1) \
                    and any(re.search(rf"(?<![\w.]){p}\b", fills.group(1)) for p in params):
                return _finding("replicated_fragment", k,
                                f"`{_quote(decl, 40)}` per thread, filled from global memory without threadIdx "
                                f"(`{_quote(ln, 100)}`): all {threads} threads load and hold the same {length} "
                                f"elements")
        if not all_reduce:
            for header, body in _cuda_loops(lines):
                if re.search(rf"<\s*{length}\s*;", header) and any(
                        re.match(rf"\s*(\w+)\[0\] = .*\b\1\[0\].*\b{name}\[", b) for b in body):
                    return _finding("replicated_fragment", k,
                                    f"`{_quote(decl, 40)}` per thread, reduced whole by `{_quote(header, 50)}` with "
                                    f"no cross-thread step: all {threads} threads compute the same total")
    return None


# --- uncoalesced_access ----------------------------------------------------------------------


def _uncoalesced(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """Adjacent threads reading addresses a row (or a large stride) apart."""
    if "ttgir" in k.asm:
        evidence = _uncoalesced_ttgir(k)
    elif k.dsl == "tilelang" and "cuda" in k.asm:
        evidence = _uncoalesced_generated_cuda(k.asm["cuda"])
    elif k.dsl == "cuda" and "cuda" in k.asm:
        evidence = _uncoalesced_cuda_source(k)
    else:
        evidence = None
    return _finding("uncoalesced_access", k, evidence) if evidence else None


_PASS_THROUGH = {"tt.addptr", "arith.addi", "arith.subi", "arith.extsi", "arith.extui", "arith.trunci",
                 "tt.broadcast", "ttg.convert_layout", "tt.expand_dims", "arith.remsi", "arith.remui"}


def _range_dim(defs: dict[str, str], value: str, depth: int = 0) -> int | None:
    """The tensor dimension along which ``value`` varies with a ``tt.make_range`` (None: it does not)."""
    line = defs.get(value)
    if line is None or depth > 24:
        return None
    op, operands = _ttgir_op(line)
    if op == "tt.make_range":
        return 0
    if op == "tt.expand_dims":
        inner = _range_dim(defs, operands[0], depth + 1) if operands else None
        axis = re.search(r"axis = (\d+)", line)
        if inner is None or axis is None:
            return None
        return inner + 1 if int(axis.group(1)) <= inner else inner
    if op in _PASS_THROUGH - {"tt.addptr"} or op == "arith.muli":
        for operand in operands:
            if (dim := _range_dim(defs, operand, depth + 1)) is not None:
                return dim
    return None


def _stride(defs: dict[str, str], value: str) -> str | None:
    """``value`` as a lane stride: a runtime scalar splat, or a dense constant >= LANE_STRIDE_MIN_ELEMENTS."""
    line = defs.get(value)
    if line is None:
        return None
    op, operands = _ttgir_op(line)
    if op == "tt.splat" and operands:
        source = defs.get(operands[0], "")
        if "arith.constant" in source:
            value = re.search(r"arith\.constant (-?\d+) :", source)
            return value.group(1) if value and abs(int(value.group(1))) >= LANE_STRIDE_MIN_ELEMENTS else None
        return f"the runtime value {operands[0].lstrip('%')}"
    if op == "arith.constant" and (m := re.search(r"dense<(-?\d+)>", line)):
        return f"{m.group(1)}" if abs(int(m.group(1))) >= LANE_STRIDE_MIN_ELEMENTS else None
    if op in ("arith.extsi", "arith.extui", "tt.broadcast", "ttg.convert_layout") and operands:
        return _stride(defs, operands[0])
    return None


def _strided_offset(defs: dict[str, str], value: str, fastest: int, depth: int = 0) -> str | None:
    """A ``tl.arange * stride`` term along the fastest dim inside the pointer or offset ``value``."""
    line = defs.get(value)
    if line is None or depth > 24:
        return None
    op, operands = _ttgir_op(line)
    if op == "arith.muli" and len(operands) == 2:
        for ranged, other in (operands, operands[::-1]):
            if _range_dim(defs, ranged) == fastest and (stride := _stride(defs, other)) is not None:
                return stride
    if op in _PASS_THROUGH or op == "arith.muli":
        for operand in operands:
            if (found := _strided_offset(defs, operand, fastest, depth + 1)) is not None:
                return found
    return None


def _uncoalesced_ttgir(k: KernelArtifact) -> str | None:
    ttgir = k.asm["ttgir"]
    lines, table = _ttgir_lines(k), _loc_table(ttgir)
    defs = _ttgir_defs(lines)
    layouts = {m.group(1): m.group(2) for m in re.finditer(r"^#(\w+) = #ttg\.blocked<\{(.*)\}>", ttgir, re.MULTILINE)}
    for ln in lines:
        # loads in a layout of their own (blocked, mma); a slice of a 2-D layout (one value per row) is left out
        m = re.search(r"= tt\.load (%[\w.]+).* : tensor<((?:\d+x)+)!tt\.ptr<(\w+)>, #(\w+)>", ln)
        if not m:
            continue
        order = re.search(r"order = \[(\d+)", layouts.get(m.group(4), ""))
        fastest = int(order.group(1)) if order else len(m.group(2).rstrip("x").split("x")) - 1
        if (stride := _strided_offset(defs, m.group(1), fastest)) is not None:
            return (f"{_at(_source_line(table, ln))}tt.load of {m.group(3)} whose offsets along the contiguous "
                    f"dimension are tl.arange x {stride}: adjacent threads read addresses a stride apart")
    return None


_TID_TERM = re.compile(r"\(\(int\)threadIdx\.x\) \* (\w+)\)")
_ELEMENT_BYTES = {"float": 4, "half_t": 2, "bfloat16_t": 2, "double": 8, "int": 4, "int64_t": 8, "half": 2,
                  "__nv_bfloat16": 2, "float4": 16, "uint4": 16, "int8_t": 1, "uint8_t": 1, "signed char": 1}


def _index_expressions(line: str, pointer: str) -> list[str]:
    """Index expressions of ``pointer[...]`` and ``(pointer + ...)`` in a line (bracket-matched)."""
    found = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(pointer)}\s*(\[|\+)", line):
        depth, start = 1, m.end()
        i = start
        while i < len(line) and depth:
            depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(line[i], 0)
            i += 1
        found.append(line[start:i - 1] if depth == 0 else line[start:])
    return found


def _uncoalesced_generated_cuda(source: str) -> str | None:
    """``((int)threadIdx.x) * C`` in a global index with C elements >= STRIDE_MIN_BYTES apart."""
    params = {name: _ELEMENT_BYTES.get(t, 4) for t, name in _GLOBAL_PARAM.findall(source)}
    for ln in source.splitlines():
        for pointer, size in params.items():
            for index in _index_expressions(ln, pointer):
                for coeff in _TID_TERM.findall(index):
                    span = int(coeff) * size if coeff.isdigit() else None
                    if span is None or span >= STRIDE_MIN_BYTES:
                        apart = f"{span} bytes" if span else f"{coeff} elements"
                        return (f"`{_quote(ln, 110)}`: adjacent threads read {pointer} {apart} apart, one memory "
                                f"transaction per thread")
    return None


def _uncoalesced_cuda_source(k: KernelArtifact) -> str | None:
    """A thread index (``threadIdx.x``, or a variable set from it) times a row length in a pointer's index."""
    body = _cuda_kernel_body(k.asm["cuda"], k.name)
    if not body:
        return None
    signature = " ".join(body[:3])
    params = [name for _, name in re.findall(r"(\w+)\s*\*\s*(?:__restrict__\s+)?(\w+)\s*[,)]", signature)]
    thread_vars = {"threadIdx.x"}
    for ln in body:  # `r = blockIdx.x * blockDim.x + threadIdx.x;`: a thread index, not divided or shifted
        if m := re.match(r"\s*(?:const\s+)?[\w:]+\s+(\w+)\s*=\s*([^;]*threadIdx\.x[^;]*);", ln):
            if not re.search(r"[/%&]|>>|<<", m.group(2)):
                thread_vars.add(m.group(1))
    tid = "|".join(re.escape(v) for v in sorted(thread_vars, key=len, reverse=True))
    term = re.compile(rf"(?<![\w.])(?:{tid})\)?\s*\*\s*(\w+)")
    for ln in body[1:]:
        for pointer in params:
            for index in _index_expressions(ln, pointer):
                for stride in term.findall(index):
                    if stride.isdigit() and int(stride) < 32:
                        continue
                    return (f"`{_quote(ln, 110)}`: consecutive threads index {pointer} {stride} elements apart, "
                            f"one memory transaction per thread")
    return None


# --- idle_threads ----------------------------------------------------------------------------


def _idle_threads(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """Threads of a block with no element of their own, in a grid that fills the GPU."""
    threads = _threads(k)
    if not threads or _programs(k) < sm_count or _tiny_block(k, cost, sm_count) is not None:
        return None
    if "ttgir" in k.asm:
        sizes = [_elements(d) for ln in _ttgir_lines(k) for d in _TENSOR.findall(ln)]
        largest = max(sizes, default=1)
        if largest < threads:
            return _finding("idle_threads", k,
                            f"the largest tensor has {largest} element(s) on {k.num_warps} warps ({threads} threads): "
                            f"{threads - largest} threads per program only hold copies")
    elif k.dsl == "tilelang" and "cuda" in k.asm:
        lines = k.asm["cuda"].splitlines()
        for i, ln in enumerate(lines):
            m = re.match(r"\s*if \(\(\(int\)threadIdx\.x\) < (\d+)\) \{", ln)
            if not m or int(m.group(1)) > threads // 2:
                continue
            region = _block(lines, i)
            closing = region[-1] + (lines[i + len(region)] if i + len(region) < len(lines) else "")
            if "else" not in closing:
                return _finding("idle_threads", k,
                                f"`{_quote(ln, 60)}` guards the work under {threads} threads per block: "
                                f"{threads - int(m.group(1))} threads idle")
    return None


# --- GEMM loops: no_pipelining, small_tiles --------------------------------------------------


_DOT = re.compile(r"= (?:tt\.dot|ttng\.warp_group_dot) .*-> tensor<((?:\d+x)+)")
_ASYNC_COPY = re.compile(r"\bcp\.async\b|cp\.async\.|async_copy|tma_load|\bcp_async")
_GEMM_CALL = re.compile(r"tl::(?:wgmma|mma|gemm)\w*|wmma::mma_sync|\bmma\.sync|wgmma\.mma_async")
_PIPELINED_LOOP = re.compile(r"cp_async|cp\.async|tma_load|mbarrier|\.wait\(")
_WARP_MMA = re.compile(r"^\s*mma\.sync\.aligned\.\w+", re.MULTILINE)
_WGMMA = re.compile(r"\bwgmma\.mma_async\b")


def _ptx_loops(ptx: str) -> list[list[str]]:
    """Loops of a PTX body: lines from a label to a later branch back to it."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\$?\w+):", ln))}
    loops = []
    for j, ln in enumerate(lines):
        if (m := re.search(r"\bbra(?:\.uni)?\s+(\$?\w+);", ln)) and labels.get(m.group(1), j) < j:
            loops.append(lines[labels[m.group(1)]:j + 1])
    return loops


def _no_pipelining(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """A K loop of tile products whose operand loads are not overlapped with the math."""
    if "ttgir" in k.asm:
        lines, table = _ttgir_lines(k), _loc_table(k.asm["ttgir"])
        for i, ln in enumerate(lines):
            if not re.search(r"= scf\.for\b", ln):
                continue
            region = _block(lines, i)
            if not any(_DOT.search(b) for b in region):
                continue
            asynchronous = _ASYNC_COPY.search(k.asm.get("ptx", "") + k.asm["ttgir"]) is not None
            if (k.num_stages or 0) <= 1 or not asynchronous:
                what = f"num_stages={k.num_stages}" + ("" if asynchronous else ", no cp.async or TMA copy in the PTX")
                return _finding("no_pipelining", k, f"{_at(_source_line(table, region[-1]))}tl.dot K loop with {what}: "
                                                    f"each K slice waits for its own loads")
        return None
    ptx = k.asm.get("ptx", "")
    if not _TENSOR_CORE.search(ptx):
        return None
    if k.dsl == "tilelang" and "cuda" in k.asm:
        # the loop that multiplies must wait on asynchronous copies (cp.async, or TMA and its mbarriers in a
        # warp-specialized kernel); an async copy elsewhere (a TMA store of C) does not pipeline the K loop
        gemm_loops = [(h, body) for h, body in _cuda_loops(k.asm["cuda"].splitlines())
                      if any(_GEMM_CALL.search(b) for b in body)]
        # only the outermost loops are K loops: an unrolled MMA loop inside one is the same line object as a
        # line of its body (the bodies are slices of one list)
        outermost = [(h, body) for h, body in gemm_loops
                     if not any(any(h is line for line in other) for _, other in gemm_loops)]
        for header, body in outermost:
            trips = re.search(r"<\s*(\d+)\s*;", header)
            staged = any("__syncthreads" in b for b in body)  # copies into shared memory, then a barrier
            if staged and (trips is None or int(trips.group(1)) >= 2) and not any(_PIPELINED_LOOP.search(b)
                                                                                   for b in body):
                return _finding("no_pipelining", k, f"`{_quote(header, 60)}` copies each K slice to shared memory "
                                                    f"synchronously, then multiplies it: no cp.async or TMA load")
        return None
    if _ASYNC_COPY.search(ptx + k.asm.get("cuda", "")):
        return None
    if k.dsl == "cuda":
        loops = [lp for lp in _ptx_loops(ptx) if any(_TENSOR_CORE.search(x) for x in lp)]
        if loops:
            inner = min(loops, key=len)
            barriers = sum(1 for x in inner if re.search(r"\bbar(?:rier)?\.sync\b", x))
            if barriers >= 2:
                return _finding("no_pipelining", k, f"the mma K loop has {barriers} bar.sync per iteration and no "
                                                    f"cp.async: loads and math take turns (single-buffered)")
    return None


def _warp_level_mma(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """TileLang and CUDA on sm_90: a GEMM on Ampere's warp-level mma.sync, not Hopper's warpgroup wgmma."""
    if k.dsl not in ("tilelang", "cuda") or not k.target.startswith("cuda:90"):
        return None
    ptx = k.asm.get("ptx", "")
    intensity = _intensity(cost)
    if intensity is None or intensity < COMPUTE_BOUND_INTENSITY or _WGMMA.search(ptx):
        return None
    first = _WARP_MMA.search(ptx)
    if first is None:
        return None
    count = len(_WARP_MMA.findall(ptx))
    return _finding("warp_level_mma", k, f"{count} `{first.group(0).strip()}` and no wgmma.mma_async in the PTX on "
                                         f"sm_90: the tensor cores run at the older warp-level rate")


def _small_tiles(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """Triton: tl.dot on small tiles where large ones would still give every SM a tile."""
    dot = next((m for ln in _ttgir_lines(k) if (m := _DOT.search(ln))), None)
    if dot is None:
        return None
    dims = [int(d) for d in dot.group(1).rstrip("x").split("x")]
    tile, programs = math.prod(dims), _programs(k)
    if tile > SMALL_TILE_ELEMENTS or programs * tile < sm_count * LARGE_TILE_ELEMENTS:
        return None
    where = _at(_source_line(_loc_table(k.asm["ttgir"]), dot.string))
    shape = "x".join(map(str, dims))
    return _finding("small_tiles", k,
                    f"{where}tl.dot on {shape} tiles over {programs} programs: A and B are re-read once per tile, up "
                    f"to {128 // min(dims[-2:])}x as often as with 128x128 tiles, which would still give "
                    f"{programs * tile // LARGE_TILE_ELEMENTS} programs for {sm_count} SMs")


# --- dtype_round_trip ------------------------------------------------------------------------


_NARROW = re.compile(r"^\s*\{?\s*cvt(?:\.(?:rn|rz|rm|rp|rna|satfinite|relu))*"
                     r"\.(f16|bf16|f16x2|bf16x2|f32)\.(f32|f64)\s+(%\w+)")
_WIDEN = re.compile(r"^\s*\{?\s*cvt\.(f32|f64)\.(f16|bf16|f32)\s+%\w+,\s*(%\w+)")
_UNPACK = re.compile(r"^\s*\{?\s*mov\.b32\s+\{\s*(%\w+),\s*(%\w+)\s*\},\s*(%\w+)")
_COPY = re.compile(r"^\s*\{?\s*mov\.b(?:16|32)\s+(%\w+),\s*(%\w+);")


def _dtype_round_trip(k: KernelArtifact, cost: Cost | None, sm_count: int) -> Finding | None:
    """A value narrowed (fp32 to fp16/bf16, fp64 to fp32) and widened straight back."""
    if "ttgir" in k.asm:
        evidence = _round_trip_ttgir(k)
    else:
        evidence = _round_trip_ptx(k.asm.get("ptx", ""))
    return _finding("dtype_round_trip", k, evidence) if evidence else None


def _round_trip_ttgir(k: KernelArtifact) -> str | None:
    lines, table = _ttgir_lines(k), _loc_table(k.asm["ttgir"])
    narrowed = {}
    for ln in lines:
        if m := re.match(r"\s*(%[\w.]+) = (?:arith\.truncf|tt\.fp_to_fp) (%[\w.]+)[^:]* : (?:tensor<(?:\d+x)*)?(\w+)"
                         r"(?:, #\w+)?>? to (?:tensor<(?:\d+x)*)?(\w+)", ln):
            narrowed[m.group(1)] = (m.group(3), m.group(4), ln)
    for ln in lines:
        m = re.match(r"\s*%[\w.]+ = (?:arith\.extf|tt\.fp_to_fp) (%[\w.]+).* to (?:tensor<(?:\d+x)*)?(\w+)", ln)
        if m and m.group(1) in narrowed and narrowed[m.group(1)][0] == m.group(2):
            wide, narrow, first = narrowed[m.group(1)]
            return (f"{_at(_source_line(table, first))}{wide} -> {narrow} -> {wide}: "
                    f"`{_quote(first.split(' loc(')[0], 80)}` then `{_quote(ln.split(' loc(')[0], 80)}`")
    return None


def _round_trip_ptx(ptx: str) -> str | None:
    origin: dict[str, tuple[str, str, str]] = {}  # register -> (wide type, narrow type, narrowing line)
    count, first = 0, None
    for ln in ptx.splitlines():  # registers are followed through unpacks (mov.b32 {lo, hi}) and copies
        if m := _NARROW.match(ln):
            narrow, wide, dst = m.group(1).removesuffix("x2"), m.group(2), m.group(3)
            if narrow != wide:
                origin[dst] = (wide, narrow, ln)
        elif (m := _UNPACK.match(ln)) and m.group(3) in origin:
            origin[m.group(1)] = origin[m.group(2)] = origin[m.group(3)]
        elif (m := _COPY.match(ln)) and m.group(2) in origin:
            origin[m.group(1)] = origin[m.group(2)]
        elif (m := _WIDEN.match(ln)) and m.group(3) in origin:
            wide, narrow, source = origin[m.group(3)]
            if m.group(1) == wide and m.group(2) == narrow:
                count += 1
                first = first or (source, ln, wide, narrow)
    if first is None:
        return None
    wide, narrow = first[2], first[3]
    return (f"{count} value(s) converted {wide} -> {narrow} -> {wide} in the PTX: "
            f"`{_quote(first[0], 60)}` then `{_quote(first[1], 60)}`")


RULES = (_serial_reduction, _replicated_fragment, _tiny_block, _scalar_loads, _uncoalesced, _idle_threads,
         _too_few_blocks, _spills, _matmul_without_tiles, _no_pipelining, _warp_level_mma, _small_tiles,
         _dtype_round_trip, _fp64)
"""Per-kernel rules, in order (feedback quotes the first findings first)."""

HELPER_RULES = (_spills, _fp64)
"""Rules that still apply to a helper kernel (few programs, beside a kernel that fills the GPU)."""


def _extra_passes(kernels: list[KernelArtifact], cost: Cost | None) -> Finding | None:
    memory_bound = cost is not None and cost.bytes_compulsory > 0 and cost.flops / cost.bytes_compulsory < 8
    launches = sum(k.launches for k in kernels)
    if memory_bound and launches >= 3:
        names = ", ".join(f"{k.name} x{k.launches}" for k in kernels)
        return Finding(code="extra_passes", kind="repairable", evidence=f"{launches} kernel launches per call ({names})",
                       hint="fuse the passes into one kernel that keeps the row in registers, so memory is "
                            "read once and written once")
    return None


def diagnose(kernels: list[KernelArtifact], cost: Cost | None, sm_count: int | None = None) -> list[Finding]:
    """Every finding of every rule on every launched kernel."""
    sms = sm_count or DEFAULT_SM_COUNT
    wide = any(_programs(k) >= sms for k in kernels)
    # when one kernel runs the matmul on tensor cores, the others (a layout pass) are not GEMMs
    uses_mma = [bool(_TENSOR_CORE.search(k.asm.get("ptx", "") + k.asm.get("sass", ""))) for k in kernels]
    findings = []
    for k, mma in zip(kernels, uses_mma):
        # a small-grid kernel beside a wide one is a helper (a combine step): its shape is not the defect
        helper = wide and _programs(k) < sms
        rules = HELPER_RULES if helper else RULES
        if any(uses_mma) and not mma:
            rules = tuple(r for r in rules if r is not _matmul_without_tiles)
        findings += [f for rule in rules if (f := rule(k, cost, sms)) is not None]
    if (extra := _extra_passes(kernels, cost)) is not None:
        findings.append(extra)
    return findings
