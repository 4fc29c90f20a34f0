"""Triton kernel facts from TTGIR and PTX, and the fix for each finding in Triton's terms.

TTGIR is MLIR text: one op per line, ``%name = op operands : types loc(#locN)``, regions in
braces, and a table of ``#locN = loc(...)`` lines that lead back to the candidate's lines. What
is read from it:

=====================  =======================================================================
fact                   TTGIR signal
=====================  =======================================================================
serial_reduction       an ``scf.for`` carrying a scalar float, fed by a scalar ``tt.load`` or a
                       ``tt.reduce`` over at most one element per thread
uncoalesced_access     a ``tt.load`` offset by ``tl.arange * stride`` along the layout's fastest
                       dim (a runtime stride, or a constant >= ``LANE_STRIDE_MIN_ELEMENTS``)
idle_threads           no tensor with as many elements as the program has threads
unpipelined_k_loop     an ``scf.for`` around a ``tl.dot`` with ``num_stages <= 1`` or no
                       cp.async/TMA copy
tile_product           the first ``tl.dot`` (``tt.dot`` / ``ttng.warp_group_dot``) output tile
dtype_round_trip       ``truncf`` (or ``fp_to_fp``) whose result is ``extf``-ed back
=====================  =======================================================================

The instruction mix comes from the PTX (``ptx_facts``). ``warp_mma`` stays unset: Triton picks
the MMA instruction from the tile shape, and ``tile_product`` speaks to that.
"""

from __future__ import annotations

import dataclasses
import math
import re

from kernelgate.diagnosis.facts import KernelFacts, TileProduct
from kernelgate.dsl._text import at_line, block, quote
from kernelgate.dsl.ptx_facts import ASYNC_COPY, ptx_facts
from kernelgate.models import KernelArtifact

__all__ = ["facts", "HINTS", "LANE_STRIDE_MIN_ELEMENTS"]

LANE_STRIDE_MIN_ELEMENTS = 16
"""A ``tl.arange`` multiplied by a constant at least this large is a lane stride."""

HINTS = {
    "scalar_global_loads": "load contiguous blocks (tl.arange over a BLOCK of 4+ elements per thread) so the "
                           "compiler emits 16-byte vector loads",
    "no_tensor_cores": "compute tiles with tl.dot on fp16/bf16 operands so the compiler uses tensor cores",
    "no_shared_memory_tiling": "tile the output (e.g. 128x128 per program) and accumulate tl.dot over K blocks so "
                               "operands are staged and reused",
    "tiny_block": "use blocks of 1024+ elements (a power of two) and 4-8 warps so each program moves wide vectors",
    "serial_reduction": "accumulate lane-wise into a vector (acc = tl.zeros([BLOCK], tl.float32); acc += x) over "
                        "BLOCK-wide chunks of 1024+ elements, and reduce once with tl.sum / tl.max after the loop",
    "replicated_fragment": "spread the tile over the program's threads with tl.arange and reduce with tl.sum",
    "uncoalesced_access": "put the contiguous dimension on tl.arange (offsets + tl.arange(0, BLOCK) along the row) "
                          "and loop over the strided one, or load a 2-D tile whose last dim is contiguous",
    "idle_threads": "match num_warps to the block: num_warps * 32 <= BLOCK (e.g. BLOCK 1024 on 4-8 warps), or "
                    "raise BLOCK",
    "no_pipelining": "software-pipeline the K loop: num_stages=3-4 so loads of later K slices overlap tl.dot",
    "warp_level_mma": "use tiles of at least 64 rows per warpgroup (e.g. 128x128 with 4-8 warps) so tl.dot lowers "
                      "to wgmma",
    "small_tiles": "use 128x128 (or 128x256) output tiles with BLOCK_K 32-64, 8 warps and 3-4 stages, or "
                   "@triton.autotune over such configs keyed on M, N, K",
    "dtype_round_trip": "convert once: keep the value in fp32 (x.to(tl.float32)) until the final store, without "
                        ".to(fp16/bf16).to(fp32) in between",
}
"""The fix for each finding code, in Triton's terms."""


def facts(k: KernelArtifact) -> KernelFacts:
    """Facts of a Triton kernel: the PTX's instruction mix, and what its TTGIR shows."""
    base = ptx_facts(k)
    if "ttgir" not in k.asm:
        return base
    ttgir = _Ttgir(k.asm["ttgir"])
    return dataclasses.replace(
        base,
        serial_reduction=_serial_reduction(ttgir, base.threads or 32),
        uncoalesced_access=_uncoalesced(ttgir),
        idle_threads=_idle_threads(ttgir, base.threads, k.num_warps),
        unpipelined_k_loop=_unpipelined_k_loop(ttgir, k.num_stages, k.asm.get("ptx", "")),
        tile_product=_tile_product(ttgir),
        dtype_round_trip=_round_trip(ttgir),
    )


# --- reading TTGIR ---------------------------------------------------------------------------


_LOC_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)\s*$", re.MULTILINE)
_TENSOR = re.compile(r"tensor<((?:\d+x)+)")
_SCALAR_FLOAT = {"f16", "bf16", "f32", "f64"}
_DOT = re.compile(r"= (?:tt\.dot|ttng\.warp_group_dot) .*-> tensor<((?:\d+x)+)")


class _Ttgir:
    """A TTGIR module: its op lines (the ``#`` attribute and location lines left out) and its location table."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
        self.locs = dict(_LOC_DEF.findall(text))

    def source_line(self, line: str) -> int | None:
        """The candidate line an op comes from (through names and call sites), or None."""
        match = re.search(r"loc\(#(loc\d*)\)\s*$", line)
        return self._resolve(match.group(1), 0) if match else None

    def _resolve(self, ref: str, depth: int) -> int | None:
        body = self.locs.get(ref)
        if body is None or depth > 32:
            return None
        if m := re.fullmatch(r'"([^"]*)":(\d+):\d+', body):
            path = m.group(1)
            own = "site-packages" not in path and "/triton/" not in path and not path.startswith("<")
            return int(m.group(2)) if own else None
        if m := re.fullmatch(r"callsite\(#(loc\d*) at #(loc\d*)\)", body):  # callee at caller: the caller is ours
            return self._resolve(m.group(2), depth + 1) or self._resolve(m.group(1), depth + 1)
        if m := re.fullmatch(r'"[^"]*"\(#(loc\d*)\)', body):
            return self._resolve(m.group(1), depth + 1)
        return None

    def at(self, line: str) -> str:
        return at_line(self.source_line(line))


def _elements(dims: str) -> int:
    return math.prod(int(d) for d in dims.rstrip("x").split("x"))


def _defs(lines: list[str]) -> dict[str, str]:
    """Each SSA value's defining line."""
    defs = {}
    for ln in lines:
        if m := re.match(r"\s*(%[\w.]+)(?::\d+)? = ", ln):
            defs[m.group(1)] = ln
    return defs


def _op(line: str) -> tuple[str, list[str]]:
    """Op name and SSA operands of a TTGIR line (types and location left out)."""
    rhs = line.split(" = ", 1)[1] if " = " in line else line.strip()
    op = rhs.split(None, 1)[0].strip('"')
    head = rhs.split(" : ", 1)[0]
    return op, re.findall(r"%[\w.]+", head)


# --- facts -----------------------------------------------------------------------------------


def _serial_reduction(ir: _Ttgir, threads: int) -> str | None:
    """An ``scf.for`` carrying a scalar float, fed by a scalar load or a reduction over <= 1 element per thread."""
    lines = ir.lines
    for i, ln in enumerate(lines):
        m = re.search(r"= scf\.for\b.*->\s*\(([^)]*)\)", ln)
        if not m or not _SCALAR_FLOAT & {t.strip() for t in m.group(1).split(",")}:
            continue
        region = block(lines, i)
        where = ir.at(region[-1])
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
                        f"({quote(ln, 90)})")
    return None


_PASS_THROUGH = {"tt.addptr", "arith.addi", "arith.subi", "arith.extsi", "arith.extui", "arith.trunci",
                 "tt.broadcast", "ttg.convert_layout", "tt.expand_dims", "arith.remsi", "arith.remui"}


def _range_dim(defs: dict[str, str], value: str, depth: int = 0) -> int | None:
    """The tensor dimension along which ``value`` varies with a ``tt.make_range`` (None: it does not)."""
    line = defs.get(value)
    if line is None or depth > 24:
        return None
    op, operands = _op(line)
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
    op, operands = _op(line)
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
    op, operands = _op(line)
    if op == "arith.muli" and len(operands) == 2:
        for ranged, other in (operands, operands[::-1]):
            if _range_dim(defs, ranged) == fastest and (stride := _stride(defs, other)) is not None:
                return stride
    if op in _PASS_THROUGH or op == "arith.muli":
        for operand in operands:
            if (found := _strided_offset(defs, operand, fastest, depth + 1)) is not None:
                return found
    return None


def _uncoalesced(ir: _Ttgir) -> str | None:
    """A load whose offsets along the layout's contiguous dim are ``tl.arange`` times a stride."""
    defs = _defs(ir.lines)
    layouts = {m.group(1): m.group(2)
               for m in re.finditer(r"^#(\w+) = #ttg\.blocked<\{(.*)\}>", ir.text, re.MULTILINE)}
    for ln in ir.lines:
        # loads in a layout of their own (blocked, mma); a slice of a 2-D layout (one value per row) is left out
        m = re.search(r"= tt\.load (%[\w.]+).* : tensor<((?:\d+x)+)!tt\.ptr<(\w+)>, #(\w+)>", ln)
        if not m:
            continue
        order = re.search(r"order = \[(\d+)", layouts.get(m.group(4), ""))
        fastest = int(order.group(1)) if order else len(m.group(2).rstrip("x").split("x")) - 1
        if (stride := _strided_offset(defs, m.group(1), fastest)) is not None:
            return (f"{ir.at(ln)}tt.load of {m.group(3)} whose offsets along the contiguous "
                    f"dimension are tl.arange x {stride}: adjacent threads read addresses a stride apart")
    return None


def _idle_threads(ir: _Ttgir, threads: int | None, num_warps: int | None) -> str | None:
    """No tensor as large as the program's threads: the rest hold copies."""
    if not threads:
        return None
    largest = max((_elements(d) for ln in ir.lines for d in _TENSOR.findall(ln)), default=1)
    if largest >= threads:
        return None
    return (f"the largest tensor has {largest} element(s) on {num_warps} warps ({threads} threads): "
            f"{threads - largest} threads per program only hold copies")


def _unpipelined_k_loop(ir: _Ttgir, num_stages: int | None, ptx: str) -> str | None:
    """A ``tl.dot`` K loop compiled with one stage, or with no asynchronous copy to overlap."""
    lines = ir.lines
    for i, ln in enumerate(lines):
        if not re.search(r"= scf\.for\b", ln):
            continue
        region = block(lines, i)
        if not any(_DOT.search(b) for b in region):
            continue
        asynchronous = ASYNC_COPY.search(ptx + ir.text) is not None
        if (num_stages or 0) <= 1 or not asynchronous:
            what = f"num_stages={num_stages}" + ("" if asynchronous else ", no cp.async or TMA copy in the PTX")
            return f"{ir.at(region[-1])}tl.dot K loop with {what}: each K slice waits for its own loads"
    return None


def _tile_product(ir: _Ttgir) -> TileProduct | None:
    dot = next((m for ln in ir.lines if (m := _DOT.search(ln))), None)
    if dot is None:
        return None
    shape = tuple(int(d) for d in dot.group(1).rstrip("x").split("x"))
    return TileProduct(shape=shape, instruction="tl.dot", source_line=ir.source_line(dot.string))


def _round_trip(ir: _Ttgir) -> str | None:
    """``truncf`` whose result is ``extf``-ed back to the type it came from."""
    narrowed = {}
    for ln in ir.lines:
        if m := re.match(r"\s*(%[\w.]+) = (?:arith\.truncf|tt\.fp_to_fp) (%[\w.]+)[^:]* : (?:tensor<(?:\d+x)*)?(\w+)"
                         r"(?:, #\w+)?>? to (?:tensor<(?:\d+x)*)?(\w+)", ln):
            narrowed[m.group(1)] = (m.group(3), m.group(4), ln)
    for ln in ir.lines:
        m = re.match(r"\s*%[\w.]+ = (?:arith\.extf|tt\.fp_to_fp) (%[\w.]+).* to (?:tensor<(?:\d+x)*)?(\w+)", ln)
        if m and m.group(1) in narrowed and narrowed[m.group(1)][0] == m.group(2):
            wide, narrow, first = narrowed[m.group(1)]
            return (f"{ir.at(first)}{wide} -> {narrow} -> {wide}: "
                    f"`{quote(first.split(' loc(')[0], 80)}` then `{quote(ln.split(' loc(')[0], 80)}`")
    return None
