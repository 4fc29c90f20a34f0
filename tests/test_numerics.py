"""Every numerics rejection rule, each tripped by a fixture, plus the rules alone on tensors."""

from __future__ import annotations

import pytest
import torch

from kernelgate import Candidate, Problem, Reason, ScreenOptions, Status, screen
from kernelgate.numerics import TOLERANCES, check_trial_output, poisoned_allocations
from tests.conftest import fixture_source

SMALL = Problem.op("rowsum", rows=16, cols=256)


@pytest.mark.parametrize("fixture, reason", [
    ("partial_write.py", Reason.nonfinite_output),
    ("nan_output.py", Reason.nonfinite_output),
    ("wrong_values.py", Reason.numerics_mismatch),
    ("wrong_shape.py", Reason.wrong_shape),
    ("wrong_dtype.py", Reason.wrong_dtype),
    ("zeros.py", Reason.trivial_output),
    ("constant.py", Reason.trivial_output),
    ("subclass_output.py", Reason.wrong_output_type),
    ("no_kernel.py", Reason.no_kernel_launched),
])
def test_rule_trips_on_its_fixture(fixture, reason):
    verdict = screen(Candidate(source=fixture_source(fixture), entry="kernel"), SMALL,
                     options=ScreenOptions(run_timeout_s=60))
    assert verdict.status is Status.reject
    assert verdict.reason is reason, verdict.failure.message


def _ref(n=64):
    ref64 = torch.randn(n, dtype=torch.float64)
    return ref64.float(), ref64


def test_tolerance_scales_with_magnitude():
    ref, ref64 = _ref()
    tol = TOLERANCES[torch.float32]
    assert check_trial_output("normal", ref.clone(), ref, ref64, tol).passed
    off = ref + 1e-2 * ref64.abs().max().float()
    assert check_trial_output("normal", off, ref, ref64, tol).reason is Reason.numerics_mismatch


def test_tiny_reference_does_not_let_zeros_pass():
    ref64 = torch.randn(64, dtype=torch.float64) * 1e-6
    result = check_trial_output("normal", torch.zeros(64), ref64.float(), ref64, TOLERANCES[torch.float32])
    assert not result.passed and result.reason is Reason.trivial_output


def test_inf_rejected_even_when_close_elsewhere():
    ref, ref64 = _ref()
    out = ref.clone()
    out[3] = float("inf")
    assert check_trial_output("normal", out, ref, ref64, TOLERANCES[torch.float32]).reason is Reason.nonfinite_output


def test_imprecise_library_sets_the_bar():
    ref64 = torch.randn(256, dtype=torch.float64)
    sloppy_library = (ref64 * (1 + 1e-3)).float()
    candidate = (ref64 * (1 + 1.5e-3)).float()
    assert check_trial_output("normal", candidate, sloppy_library, ref64, TOLERANCES[torch.float32]).passed


def test_poisoned_allocations_fill_nan_and_restore():
    with poisoned_allocations():
        assert torch.isnan(torch.empty(1000)).all()
    assert not torch.are_deterministic_algorithms_enabled()


def test_state_is_randomized_and_copied():
    from kernelgate.problems import randomize_state

    ln = torch.nn.LayerNorm(32)
    randomize_state(ln, torch.Generator().manual_seed(0))
    assert not torch.all(ln.weight == 1) and not torch.all(ln.bias == 0)


def test_same_values_compares_slice_by_slice(monkeypatch):
    import kernelgate.numerics as numerics

    monkeypatch.setattr(numerics, "CHUNK_ELEMENTS", 7)  # many slices, the last one partial
    a = torch.arange(50, dtype=torch.float32).reshape(5, 10)
    a[0, 3] = float("nan")
    b = a.clone()
    assert numerics.same_values(a, b)  # NaN equals NaN
    b[4, 9] = 0.5  # in the last slice
    assert not numerics.same_values(a, b)
    assert not numerics.same_values(a, a.double()) and not numerics.same_values(a, a.reshape(10, 5))
    ints = torch.arange(20)
    assert numerics.same_values(ints, ints.clone()) and not numerics.same_values(ints, ints.flip(0))


def _verdicts(ref, ref64, outputs, tol=TOLERANCES[torch.float32]):
    return [(r.passed, r.reason, r.normalized_error) for r in
            (check_trial_output("t", out, ref, ref64, tol) for out in outputs)]


def _cases(device):
    gen = torch.Generator().manual_seed(3)
    ref64 = torch.randn(5, 11, generator=gen, dtype=torch.float64).to(device)
    ref = ref64.float()
    off_last = ref.clone()
    off_last[4, 10] += 1.0  # in the last, partial slice
    nan_last = ref.clone()
    nan_last[4, 9] = float("nan")
    return ref, ref64, [ref.clone(), off_last, nan_last, torch.zeros_like(ref), torch.full_like(ref, 2.0)]


def test_check_trial_output_reads_the_exact_reference_in_slices(monkeypatch):
    import kernelgate.numerics as numerics

    ref, ref64, outputs = _cases("cpu")
    whole = _verdicts(ref, ref64, outputs)
    assert [v[:2] for v in whole] == [(True, None), (False, Reason.numerics_mismatch), (False, Reason.nonfinite_output),
                                      (False, Reason.trivial_output), (False, Reason.trivial_output)]
    monkeypatch.setattr(numerics, "CHUNK_ELEMENTS", 7)  # many slices, the last one partial
    assert _verdicts(ref, ref64, outputs) == whole
    ints = torch.arange(30).reshape(5, 6)
    wrong = ints.clone()
    wrong[4, 5] = 0
    assert check_trial_output("t", ints.clone(), ints, ints.double(), TOLERANCES[torch.float32]).passed
    assert check_trial_output("t", wrong, ints, ints.double(), TOLERANCES[torch.float32]).reason is Reason.numerics_mismatch


@pytest.mark.gpu
def test_an_exact_reference_on_the_host_judges_a_gpu_output_as_one_on_the_gpu(monkeypatch):
    """A large output-dominant problem keeps its fp64 expected output on the host (the memory budget)."""
    import kernelgate.numerics as numerics

    monkeypatch.setattr(numerics, "CHUNK_ELEMENTS", 7)
    ref, ref64, outputs = _cases("cuda")
    assert _verdicts(ref, ref64.cpu(), outputs) == _verdicts(ref, ref64, outputs)
