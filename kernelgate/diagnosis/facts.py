"""Kernel facts: what the diagnosis rules know about one launched kernel, in no DSL's terms.

A DSL plug-in turns its artifacts (IR, generated C, PTX, SASS) into a ``KernelFacts``; the rules
read nothing else. Counts and sizes are plain numbers. A defect that only the DSL's own text can
show (a loop that reduces into one thread's scalar, a strided index) is an *observation*: the
evidence text quoting the artifact, or None when the plug-in did not see it. A plug-in that
cannot read something leaves its field at the default, and the rules stay quiet about it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgate.models import KernelArtifact

__all__ = ["KernelFacts", "TileProduct", "WarpMma"]


@dataclass(frozen=True)
class TileProduct:
    """The first tile product (matrix multiply of two tiles) of a kernel."""

    shape: tuple[int, ...]
    """The output tile's shape (``(32, 32)``)."""
    instruction: str
    """The DSL's name for it, as the evidence quotes it (``tl.dot``)."""
    source_line: int | None = None
    """The candidate's line it comes from, where the artifact leads back to one."""


@dataclass(frozen=True)
class WarpMma:
    """Warp-level MMA instructions (Ampere's ``mma.sync``) on a Hopper target with no ``wgmma``."""

    count: int
    first: str
    """The first such instruction, as written in the PTX."""


@dataclass(frozen=True)
class KernelFacts:
    """DSL-neutral facts of one kernel (``from_artifact`` fills those the artifact model holds)."""

    kernel: str
    launches: int = 1
    """Launches per forward call."""
    grid: tuple[int, ...] | None = None
    """Grid of the first launch."""
    threads: int | None = None
    """Threads per block."""
    num_warps: int | None = None
    block_sizes: tuple[int, ...] = ()
    """Compile-time block sizes in elements (constants named ``BLOCK*``)."""
    shared_bytes: int | None = None
    registers: int | None = None
    spill_bytes: int | None = None

    # instruction mix (PTX, SASS)
    global_loads: int = 0
    """Global-memory load instructions."""
    vector_loads: int = 0
    """Of those, loads of 2, 4 or 8 elements at once."""
    tensor_cores: bool = False
    """Any tensor-core (MMA) instruction."""
    warp_mma: WarpMma | None = None
    """Warp-level MMA where the target has warpgroup MMA; None where the author does not pick the
    instruction (a compiler that chooses it from the tile shape)."""
    fp64_ops: int = 0
    fp32_ops: int = 0
    """Floating-point arithmetic instructions of each width."""

    # structure (the DSL's IR or source)
    tile_product: TileProduct | None = None

    # observations: evidence text, or None when not seen
    serial_reduction: str | None = None
    """A reduction walked by one thread's loop into a scalar instead of a tree across threads."""
    replicated_fragment: str | None = None
    """A per-thread copy of a whole tile that every thread fills or reduces alike."""
    uncoalesced_access: str | None = None
    """Adjacent threads reading global addresses a row (or a large stride) apart."""
    idle_threads: str | None = None
    """Threads of a block with no element of their own."""
    unpipelined_k_loop: str | None = None
    """A loop of tile products whose operand loads are not overlapped with the math."""
    dtype_round_trip: str | None = None
    """A value narrowed (fp32 to fp16/bf16, fp64 to fp32) and widened straight back."""

    @classmethod
    def from_artifact(cls, k: KernelArtifact) -> KernelFacts:
        """The facts the artifact model states itself; the rest at their defaults.

        Threads per block: the ``threads`` constant where the plug-in records one, else
        ``num_warps * 32``."""
        declared = k.constexprs.get("threads")
        if isinstance(declared, int) and declared > 0:
            threads = declared
        else:
            threads = k.num_warps * 32 if k.num_warps else None
        blocks = tuple(v for n, v in k.constexprs.items() if n.upper().startswith("BLOCK") and isinstance(v, int))
        return cls(kernel=k.name, launches=k.launches, grid=tuple(k.grid) if k.grid is not None else None,
                   threads=threads, num_warps=k.num_warps, block_sizes=blocks, shared_bytes=k.shared_bytes,
                   registers=k.registers, spill_bytes=k.spill_bytes)
