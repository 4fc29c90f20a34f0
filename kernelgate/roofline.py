"""The roofline screen: pure formulas.

    t_floor = max(F / P_peak(mode), B / BW_peak, t_launch)
    U       = t_floor / t_measured          (U > 1 is physically impossible)
    LRE     = t_library / t_candidate       (> 1: faster than the library)

F: algorithmic FLOPs; B: compulsory bytes (each input read once, each output written once);
P_peak per math mode and BW_peak from ``kernelgate.hardware.Peaks``; t_launch the cost of one
empty launch, so that problems smaller than a launch get a floor they can reach.
"""

from __future__ import annotations

from typing import Literal

from kernelgate.hardware import MathMode, Peaks

__all__ = ["t_floor_ms", "bound", "utilization", "lre"]


def _terms_ms(flops: float, nbytes: float, peaks: Peaks, mode: MathMode) -> dict[str, float]:
    return {
        "compute": flops / (peaks.tflops(mode) * 1e12) * 1e3,
        "memory": nbytes / (peaks.bw_gbs * 1e9) * 1e3,
        "launch": peaks.launch_latency_us * 1e-3,
    }


def t_floor_ms(flops: float, nbytes: float, peaks: Peaks, mode: MathMode) -> float:
    """The physical floor time of one call, in milliseconds."""
    return max(_terms_ms(flops, nbytes, peaks, mode).values())


def bound(flops: float, nbytes: float, peaks: Peaks, mode: MathMode) -> Literal["compute", "memory", "launch"]:
    """Which term sets the floor."""
    terms = _terms_ms(flops, nbytes, peaks, mode)
    return max(terms, key=terms.get)


def utilization(floor_ms: float, measured_ms: float) -> float:
    """U = t_floor / t_measured."""
    return floor_ms / measured_ms if measured_ms > 0 else float("inf")


def lre(library_ms: float, candidate_ms: float) -> float:
    """Library-relative efficiency t_library / t_candidate."""
    return library_ms / candidate_ms
