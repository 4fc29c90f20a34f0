"""Correctness: the candidate against an fp64 reference and the library in the problem's dtype.

Each trial draws fresh inputs from another distribution. Uninitialized memory is filled with NaN
while the candidate runs (``torch.utils.deterministic.fill_uninitialized_memory``), so elements a
kernel never writes show up as NaN. The error measure scales with the output's magnitude::

    normalized_error = max_i |c_i - r_i| / (atol * rms(r) + rtol * |r_i|)     (r: fp64 reference)

A trial passes when it is <= 1, or when it is within twice the library's own error in the same
dtype (a library that is itself imprecise, such as TF32 convolutions, sets the bar it is held to).
Integer outputs (argmax indices) must match exactly: their normalized error is the largest
difference over 0.5, so any mismatch is above 1. A problem may bring its own tolerance (a
catalogue op's ``tolerance``, e.g. TF32 matmul); ``TOLERANCES`` is the default per dtype.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from kernelgate.models import Reason, TrialResult

__all__ = ["Tolerance", "TOLERANCES", "Expected", "expect", "poisoned_allocations", "check_trial_output",
           "same_values", "changed_inputs"]


@dataclass(frozen=True)
class Tolerance:
    atol: float
    """Relative to the rms of the reference output."""
    rtol: float


TOLERANCES = {
    torch.float32: Tolerance(atol=1e-4, rtol=1e-4),
    torch.float16: Tolerance(atol=1e-2, rtol=1e-2),
    torch.bfloat16: Tolerance(atol=2e-2, rtol=2e-2),
}
"""Per dtype. fp32 matches KernelBench's 1e-4, but against fp64 and scaled by the output's rms."""


@contextlib.contextmanager
def poisoned_allocations():
    """Fill memory from ``torch.empty`` and friends with NaN while the block runs."""
    import torch.utils.deterministic as det

    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
                det.fill_uninitialized_memory)
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        det.fill_uninitialized_memory = previous[2]


CHUNK_ELEMENTS = 1 << 22
"""Comparisons run over slices of this many elements (fp64 temporaries of 32 MB, about six alive at
once), so checking a 6.4 GB output takes a few slices' memory, not several copies of the whole. At
256 MB slices the temporaries alone were 1.3 GB, 2.4x the footprint of a 0.5 GB LayerNorm (H100,
2026-12-07, ``benchmarks/results/memtrace_kb_h100.txt``)."""


def _slices(*tensors: torch.Tensor, device: torch.device | None = None):
    """Matching flat slices of tensors of one shape, each piece on ``device`` where one is named
    (a large fp64 reference is held on the host and comes to the output's device a slice at a time)."""
    flat = [t.reshape(-1) for t in tensors]
    total = flat[0].numel()
    for start in range(0, total, CHUNK_ELEMENTS):
        pieces = [f[start:start + CHUNK_ELEMENTS] for f in flat]
        yield pieces if device is None else [p.to(device) for p in pieces]


def normalized_error(out: torch.Tensor, ref64: torch.Tensor, tol: Tolerance, *, rms: float | None = None,
                     mask: torch.Tensor | None = None) -> tuple[float, float]:
    """(max abs error, normalized error) of ``out`` against the fp64 reference, over ``mask``.

    normalized_error = max_i |c_i - r_i| / (atol * rms(r) + rtol * |r_i|), in slices. Integer and
    boolean outputs are compared exactly: the normalized error is the max abs error / 0.5.
    """
    mask = mask if mask is not None else torch.ones(out.shape, dtype=torch.bool, device=out.device)
    if rms is None:
        rms = _rms_masked(ref64, mask)
    return _errors_against(ref64, [out], tol, rms, mask)[0]


def _is_constant(t: torch.Tensor) -> bool:
    if t.numel() <= 1:
        return False
    first = t.reshape(-1)[0]
    return all(bool((piece == first).all()) for (piece,) in _slices(t))


def _all_zero(t: torch.Tensor) -> bool:
    return all(bool((piece == 0).all()) for (piece,) in _slices(t))


@dataclass
class Expected:
    """What a candidate's output is judged against, made before the candidate runs (``expect``), so
    that the caller can let the library's own output go first (the memory budget: an output-dominant
    problem then holds the fp64 reference and the output slot, not the library's output beside them)."""

    shape: tuple
    dtype: torch.dtype
    device: torch.device
    exact: torch.Tensor
    """The fp64 reference, or the library's output where there is none; it may wait on the host."""
    finite: torch.Tensor
    """Where both the library's result and the exact one are finite and not near the dtype's limit."""
    finite_count: int
    trivial: bool
    """The exact result, or the library's in this dtype, is all zeros or one constant."""
    rms: float
    ref_err: float
    """The library's own normalized error against the fp64 reference (0 without one)."""
    tol: Tolerance


def expect(ref: torch.Tensor, ref64: torch.Tensor | None, tol: Tolerance) -> Expected:
    """The parts of the check that do not depend on the candidate's output, in one pass over the
    exact reference (plus one for the library's own error). ``ref64`` is the fp64 reference; None
    takes the library's own output ``ref`` in its place (the timed repetitions, whose expected
    output is the library's on the same inputs)."""
    exact = ref64 if ref64 is not None else ref  # may be on the host: its slices come to ref's device
    device = ref.device
    # where the library's own result in this dtype overflows, the candidate's may too; so may an
    # element within a factor 2 of the dtype's largest value (a sum rounded another way overflows)
    edge = torch.finfo(ref.dtype).max / 2 if ref.is_floating_point() else float("inf")
    finite = torch.empty(ref.shape, dtype=torch.bool, device=device)
    finite_count, squares = 0, 0.0
    exact_zero, exact_constant = True, exact.numel() > 1
    first = exact.reshape(-1)[:1].to(device)
    for f, r, r64 in _slices(finite, ref, exact, device=device):
        f.copy_(torch.isfinite(r64) & torch.isfinite(r) & (r64.abs() <= edge))
        finite_count += int(f.sum())
        exact_zero = exact_zero and bool((r64 == 0).all())
        exact_constant = exact_constant and bool((r64 == first).all())
        squares += float(r64[f].double().pow(2).sum())
    # trivial where the exact result is, or where the library's own result in this dtype is (a bf16
    # sum of large values rounds every row to one number)
    trivial = exact_zero or exact_constant or _all_zero(ref) or _is_constant(ref)
    rms = math.sqrt(squares / finite_count) if finite_count else 0.0
    ref_err = (_errors_against(exact, [ref], tol, rms, finite)[0][1] if ref64 is not None and finite_count else 0.0)
    return Expected(shape=tuple(ref.shape), dtype=ref.dtype, device=ref.device, exact=exact, finite=finite,
                    finite_count=finite_count, trivial=trivial, rms=rms, ref_err=ref_err, tol=tol)


def check_trial_output(distribution: str, out: object, ref: torch.Tensor | Expected,
                       ref64: torch.Tensor | None = None, tol: Tolerance | None = None) -> TrialResult:
    """Every rule a candidate's output must pass, in the order that gives the clearest reason,
    against ``ref`` made ready by ``expect`` or against the library's output ``ref``, the fp64
    reference ``ref64`` (see ``expect``) and ``tol``. Large outputs are checked in slices
    (``CHUNK_ELEMENTS``)."""
    want = ref if isinstance(ref, Expected) else expect(ref, ref64, tol)

    def fail(reason: Reason, message: str, **errors) -> TrialResult:
        return TrialResult(distribution=distribution, passed=False, reason=reason, message=message, **errors)

    if type(out) is not torch.Tensor:  # subclasses and lazy wrappers can fake their contents
        return fail(Reason.wrong_output_type, f"forward returned {type(out).__module__}.{type(out).__name__}, "
                    "not a plain torch.Tensor")
    if out.layout is not torch.strided:
        return fail(Reason.wrong_output_type, f"output layout is {out.layout}, not strided")
    if tuple(out.shape) != want.shape:
        return fail(Reason.wrong_shape, f"output shape {tuple(out.shape)}, reference {want.shape}")
    if out.dtype != want.dtype:
        return fail(Reason.wrong_dtype, f"output dtype {out.dtype}, reference {want.dtype}")
    if out.device != want.device:
        return fail(Reason.wrong_output_type, f"output on {out.device}, reference on {want.device}")
    device, exact, tol = out.device, want.exact, want.tol
    bad_count = sum(int((~torch.isfinite(c) & f).sum()) for c, f in _slices(out, want.finite))
    if bad_count:
        return fail(Reason.nonfinite_output, f"{bad_count} of {out.numel()} output elements are NaN or Inf where the "
                    "reference is finite (outputs are poisoned with NaN before the run: unwritten elements show "
                    "as NaN)")
    if not want.trivial and _all_zero(out):
        largest = max(float(r64.abs().max()) for _, r64 in _slices(want.finite, exact, device=device))
        return fail(Reason.trivial_output, f"output is all zeros; the reference's max |y| is {largest:.3g}")
    if not want.trivial and _is_constant(out):
        return fail(Reason.trivial_output, f"output is the constant {float(out.reshape(-1)[0]):.6g}; the reference is not constant")
    if not want.finite_count:  # nothing finite to compare: the caller skips such a trial
        return TrialResult(distribution=distribution, passed=True)
    abs_err, norm_err = _errors_against(exact, [out], tol, want.rms, want.finite)[0]
    ref_err = want.ref_err
    errors = dict(max_abs_error=abs_err, normalized_error=norm_err, reference_normalized_error=ref_err)
    if norm_err > 1.0 and norm_err > 2.0 * ref_err and not (out.is_floating_point() or out.is_complex()):
        wrong = sum(int((c[m].double() != r[m].double()).sum())
                    for c, r, m in _slices(out, exact, want.finite, device=device))
        return fail(Reason.numerics_mismatch, f"{wrong} of {want.finite_count} integer output elements differ from "
                    f"the fp64 reference's (max difference {abs_err:.6g}); integer outputs must match exactly", **errors)
    if norm_err > 1.0 and norm_err > 2.0 * ref_err:
        return fail(Reason.numerics_mismatch, f"max |candidate - fp64 reference| = {abs_err:.3g}, {norm_err:.3g}x the "
                    f"tolerance (atol {tol.atol:g} x rms, rtol {tol.rtol:g}); the library in this dtype is at "
                    f"{ref_err:.3g}x", **errors)
    return TrialResult(distribution=distribution, passed=True, **errors)


def _errors_against(exact: torch.Tensor, outputs: list, tol: Tolerance, rms: float,
                    mask: torch.Tensor) -> list[tuple[float, float]]:
    """(max abs error, normalized error) of each of ``outputs`` against ``exact`` over ``mask``, in
    one pass over ``exact`` (which may be on the host)."""
    worst = [[0.0, 0.0] for _ in outputs]
    integer = not (outputs[0].is_floating_point() or outputs[0].is_complex())
    for pieces in _slices(exact, mask, *outputs, device=mask.device):
        r, m = pieces[0], pieces[1]
        if not bool(m.any()):
            continue
        r = r[m].double()
        scale = tol.atol * max(rms, 1e-30) + tol.rtol * r.abs()
        for i, c in enumerate(pieces[2:]):
            diff = (c[m].double() - r).abs()
            worst[i][0] = max(worst[i][0], float(diff.max()))
            if not integer:
                worst[i][1] = max(worst[i][1], float((diff / scale).max()))
    if integer:
        return [(a, a / 0.5) for a, _ in worst]
    return [(a, n) for a, n in worst]


def _rms_masked(ref64: torch.Tensor, mask: torch.Tensor) -> float:
    total, count = 0.0, 0
    for r, m in _slices(ref64, mask, device=mask.device):
        total += float(r[m].double().pow(2).sum())
        count += int(m.sum())
    return math.sqrt(total / count) if count else 0.0


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values (NaN equal to NaN), same shape and dtype."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    for x, y in _slices(a, b):  # in slices: whole-size boolean temporaries of a 6 GB input add up to its size
        equal = x == y
        if a.is_floating_point():
            equal |= torch.isnan(x) & torch.isnan(y)
        if not bool(equal.all()):
            return False
    return True


def changed_inputs(originals: list, given: list) -> list[str]:
    """Positions (``#0``...) of tensor inputs whose values, shape or dtype differ from the originals."""
    changed = []
    for index, (orig, seen) in enumerate(zip(originals, given)):
        if isinstance(orig, torch.Tensor) and isinstance(seen, torch.Tensor) and not same_values(orig, seen):
            changed.append(f"#{index} {tuple(orig.shape)}")
    return changed


