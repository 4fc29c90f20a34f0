"""Helion kernel facts and hints: the generated Triton read by the Triton plug-in's facts, the fix
for each finding in Helion's terms.

Helion's artifacts are Triton artifacts of the module Helion generated (TTGIR, PTX), so their
facts are ``triton_facts.facts``. Two things differ, and are settled here:

- **lines.** The TTGIR's locations point into the generated module. Helion writes a
  ``# src[candidate.py:N]: ...`` comment above the code it generates from the candidate's line N,
  so ``candidate_locations`` (run in the candidate's process, where the generated file is) rewrites
  each location to the candidate's line, and the evidence cites the line the author wrote.
- **hints.** The author does not write ``tl.arange`` or ``num_warps=`` on a launch: block sizes
  come from ``hl.tile`` and the config (``helion.Config(block_sizes=[...], num_warps=...)``).

Like every facts module this is read in the screening parent: text only, no Helion or Triton import.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelgate.diagnosis.facts import KernelFacts
from kernelgate.dsl import triton_facts
from kernelgate.models import KernelArtifact

__all__ = ["facts", "HINTS", "candidate_locations"]

HINTS = {
    "scalar_global_loads": "give the contiguous (last) dimension a tile of 4+ elements per thread: a larger "
                           "block size for its hl.tile in helion.Config(block_sizes=[...]), or take it whole "
                           "(x[tile, :]), so the generated loads are 16-byte vectors",
    "no_tensor_cores": "compute tiles with torch.matmul / hl.dot on fp16/bf16 tiles inside the hl.tile loop, "
                       "accumulating into an fp32 hl.zeros, so Helion emits tl.dot on tensor cores",
    "no_shared_memory_tiling": "tile the output with hl.tile([m, n]) and loop over K with hl.tile(k), "
                               "accumulating acc = torch.addmm(acc, a[tm, tk], b[tk, tn]), so operands are "
                               "staged and reused",
    "tiny_block": "raise the block sizes: helion.Config(block_sizes=[...]) with 1024+ elements per tile (a power "
                  "of two), or take a row whole with x[tile, :], and 4-8 num_warps",
    "serial_reduction": "reduce over a whole tile, not element by element: take the reduced dimension whole "
                        "(x[tile, :].sum(-1)) or in hl.tile chunks of 1024+ accumulated into an "
                        "hl.zeros([tile, chunk]) vector, and reduce once after the loop",
    "replicated_fragment": "give the tile enough elements for the program's threads: larger block_sizes, or "
                           "fewer num_warps in helion.Config",
    "uncoalesced_access": "make the innermost hl.tile run over the tensor's contiguous (last) dimension, or "
                          "transpose the loop order (helion.Config(loop_orders=[...])), so adjacent lanes read "
                          "adjacent addresses",
    "idle_threads": "match num_warps to the tile: num_warps * 32 <= elements per tile (e.g. block_sizes giving "
                    "1024 elements on 4-8 warps), or raise the block sizes",
    "no_pipelining": "pipeline the K loop: helion.Config(num_stages=3..4, range_num_stages=[...]) so loads of "
                     "later K tiles overlap the dot",
    "warp_level_mma": "use output tiles of at least 64 rows (block_sizes=[128, 128, 64] with 4-8 num_warps) so "
                      "the dot lowers to wgmma",
    "small_tiles": "use 128x128 (or 128x256) output tiles with a K block of 32-64, num_warps=8 and num_stages "
                   "3-4 in helion.Config, or list such configs in configs=[...] for Helion to choose from",
    "dtype_round_trip": "convert once: keep values in fp32 (.to(torch.float32)) until the final store, without "
                        ".to(fp16/bf16).to(fp32) in between",
}
"""The fix for each finding code, in Helion's terms."""


def facts(k: KernelArtifact) -> KernelFacts:
    """Facts of a Helion kernel: those of its generated Triton."""
    return triton_facts.facts(k)


_LOC_FILE = re.compile(r'^(#loc\d*) = loc\("([^"]*)":(\d+):(\d+)\)\s*$', re.MULTILINE)
_SRC = re.compile(r"#\s*src\[([^\]:]+):(\d+)")


def _candidate_lines(generated: Path, candidate_name: str) -> dict[int, int]:
    """Generated line -> the candidate line of the nearest ``# src[<candidate>:N]`` comment above it."""
    mapping, current = {}, None
    for number, text in enumerate(generated.read_text().splitlines(), start=1):
        stripped = text.strip()
        if stripped.startswith("def ") or stripped.startswith("@"):
            current = None  # a new function: comments of the last one no longer apply
        if m := _SRC.search(text):
            current = int(m.group(2)) if Path(m.group(1)).name == candidate_name else None
        if current is not None:
            mapping[number] = current
    return mapping


def candidate_locations(ttgir: str, generated: Path, candidate: Path) -> str:
    """The TTGIR with each location in the generated module moved to the candidate's line it came
    from (Helion's ``# src[...]`` comments); one it cannot place is marked as Helion's own code."""
    try:
        lines = _candidate_lines(generated, candidate.name)
    except OSError:
        return ttgir
    target = str(generated)

    def move(m: re.Match) -> str:
        if m.group(2) != target:
            return m.group(0)
        if int(m.group(3)) not in lines:  # Helion's own code (index arithmetic, masks): no line of the author's
            return f'{m.group(1)} = loc("<helion-generated>":{m.group(3)}:{m.group(4)})'
        return f'{m.group(1)} = loc("{candidate}":{lines[int(m.group(3))]}:{m.group(4)})'

    return _LOC_FILE.sub(move, ttgir)
