"""Kernel facts every NVIDIA backend shares, read from PTX (and SASS where there is one).

``ptx_facts`` fills the instruction mix (loads and their width, tensor-core use, fp64 share) and a
dtype round trip through registers; each DSL's facts module starts from it and adds what its own
IR or source shows. The other helpers here read PTX for those modules.
"""

from __future__ import annotations

import dataclasses
import re

from kernelgate.diagnosis.facts import KernelFacts, WarpMma
from kernelgate.dsl._text import quote
from kernelgate.models import KernelArtifact

__all__ = ["ptx_facts", "warp_mma", "round_trip", "loops", "has_cross_thread_step", "TENSOR_CORE", "ASYNC_COPY"]

_VECTOR_LOAD = re.compile(r"ld\.global(?:\.\w+)*\.v[248]\.")
_ANY_LOAD = re.compile(r"ld\.global")
TENSOR_CORE = re.compile(r"\b(?:mma\.sync|wgmma\.mma_async|HMMA|HGMMA)\b")
"""A tensor-core instruction in PTX or SASS."""
ASYNC_COPY = re.compile(r"\bcp\.async\b|cp\.async\.|async_copy|tma_load|\bcp_async")
"""An asynchronous global-to-shared copy (cp.async, TMA), in PTX, TTGIR or generated C."""
_ARITH = r"\b(?:add|sub|mul|fma|mad|div|sqrt|rsqrt|rcp|neg|abs|min|max)(?:\.\w+)*"
_F64_ARITH = re.compile(_ARITH + r"\.f64\b")
_F32_ARITH = re.compile(_ARITH + r"\.f32\b")
_WARP_MMA = re.compile(r"^\s*mma\.sync\.aligned\.\w+", re.MULTILINE)
_WGMMA = re.compile(r"\bwgmma\.mma_async\b")
_CROSS_THREAD = re.compile(r"\bshfl\.sync|\bbar\.sync|\bbarrier\.sync|\batom\.|\bred\.|\bredux\.sync")


def ptx_facts(k: KernelArtifact) -> KernelFacts:
    """The artifact's own facts plus the instruction mix of its PTX and SASS, and a round trip in its PTX."""
    ptx, sass = k.asm.get("ptx", ""), k.asm.get("sass", "")
    return dataclasses.replace(
        KernelFacts.from_artifact(k),
        global_loads=len(_ANY_LOAD.findall(ptx)),
        vector_loads=len(_VECTOR_LOAD.findall(ptx)),
        tensor_cores=TENSOR_CORE.search(ptx + sass) is not None,
        fp64_ops=len(_F64_ARITH.findall(ptx)),
        fp32_ops=len(_F32_ARITH.findall(ptx)),
        dtype_round_trip=round_trip(ptx),
    )


def warp_mma(k: KernelArtifact) -> WarpMma | None:
    """Ampere's warp-level ``mma.sync`` in the PTX of an sm_90 kernel that has no Hopper ``wgmma``."""
    ptx = k.asm.get("ptx", "")
    if not k.target.startswith("cuda:90") or _WGMMA.search(ptx):
        return None
    first = _WARP_MMA.search(ptx)
    if first is None:
        return None
    return WarpMma(count=len(_WARP_MMA.findall(ptx)), first=first.group(0).strip())


def has_cross_thread_step(ptx: str) -> bool:
    """A shuffle, barrier, atomic or warp reduction: threads combine their values."""
    return _CROSS_THREAD.search(ptx) is not None


def loops(ptx: str) -> list[list[str]]:
    """Loops of a PTX body: lines from a label to a later branch back to it."""
    lines = ptx.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\$?\w+):", ln))}
    found = []
    for j, ln in enumerate(lines):
        if (m := re.search(r"\bbra(?:\.uni)?\s+(\$?\w+);", ln)) and labels.get(m.group(1), j) < j:
            found.append(lines[labels[m.group(1)]:j + 1])
    return found


_NARROW = re.compile(r"^\s*\{?\s*cvt(?:\.(?:rn|rz|rm|rp|rna|satfinite|relu))*"
                     r"\.(f16|bf16|f16x2|bf16x2|f32)\.(f32|f64)\s+(%\w+)")
_WIDEN = re.compile(r"^\s*\{?\s*cvt\.(f32|f64)\.(f16|bf16|f32)\s+%\w+,\s*(%\w+)")
_UNPACK = re.compile(r"^\s*\{?\s*mov\.b32\s+\{\s*(%\w+),\s*(%\w+)\s*\},\s*(%\w+)")
_COPY = re.compile(r"^\s*\{?\s*mov\.b(?:16|32)\s+(%\w+),\s*(%\w+);")


def round_trip(ptx: str) -> str | None:
    """A narrowing ``cvt`` whose register is widened straight back to its type, as evidence."""
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
            f"`{quote(first[0], 60)}` then `{quote(first[1], 60)}`")
