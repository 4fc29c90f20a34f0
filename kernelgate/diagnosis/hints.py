"""What to change for each finding, in no DSL's terms.

A plug-in's ``hints`` (finding code -> text in its DSL's terms) come first; these serve the codes
it leaves out and every kernel of a DSL with no plug-in hints.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["GENERIC_HINTS", "hint"]

GENERIC_HINTS = {
    "scalar_global_loads": "have each thread load 16 contiguous bytes at a time, adjacent threads on adjacent "
                           "addresses, so the compiler emits vector loads",
    "no_tensor_cores": "compute the tile products with the DSL's matrix-multiply primitive on fp16/bf16 operands, "
                       "so they run on tensor cores",
    "no_shared_memory_tiling": "tile the output (e.g. 128x128 per block), stage A and B tiles in shared memory "
                               "and accumulate over K, so each operand is read from memory once per tile",
    "tiny_block": "use 128-256 threads per block, each handling a vector of elements",
    "serial_reduction": "let the block's threads accumulate element-wise over the row, then reduce once across "
                        "them with a tree (warp shuffles, one shared-memory step across warps)",
    "replicated_fragment": "give each thread its own slice of the tile and combine the slices with a "
                           "cross-thread reduction",
    "uncoalesced_access": "map adjacent threads to the contiguous dimension and loop over the strided one",
    "idle_threads": "give every thread of the block elements of its own: fewer threads or a larger tile",
    "no_pipelining": "pipeline the K loop (2-4 stages of asynchronous copies) so the next K slice loads while the "
                     "current one is multiplied",
    "warp_level_mma": "use tiles of at least 64 rows per warpgroup (e.g. 128x128) so the products lower to "
                      "Hopper's wgmma",
    "small_tiles": "use 128x128 (or 128x256) output tiles, or autotune the tile shape on M, N and K",
    "dtype_round_trip": "convert each value once (to fp32 on load, back on the final store) and keep "
                        "intermediates in fp32",
    "too_few_blocks": "split each row (or the reduction) over several programs, e.g. partial results in a first "
                      "kernel and a small combine, so every SM has work",
    "register_spills": "shrink the block or the number of live values per thread, or raise num_warps",
    "fp64_arithmetic": "keep accumulators in fp32; fp64 runs at a fraction of the fp32 rate",
    "extra_passes": "fuse the passes into one kernel that keeps the row in registers, so memory is read once and "
                    "written once",
}
"""The generic fix for every code the rules report."""


def hint(code: str, dsl_hints: Mapping[str, str] | None) -> str:
    """The fix for ``code``: the DSL's own text where its plug-in has one, else the generic one."""
    return (dsl_hints or {}).get(code) or GENERIC_HINTS[code]
