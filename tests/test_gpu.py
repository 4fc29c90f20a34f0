"""GPU-only checks of the whole pipeline; run on the device with `./kg test -m gpu`."""

from __future__ import annotations

import pytest

from kernelgate import Candidate, Problem, Reason, ScreenOptions, Status, ncu, screen
from tests.conftest import EXAMPLES, fixture_source

pytestmark = pytest.mark.gpu

FAST = ScreenOptions(timing_reps=10, run_timeout_s=60)


def test_good_rowsum_is_timed_with_both_screens():
    v = screen(Candidate(source=fixture_source("rowsum_good.py"), entry="kernel"), Problem.op("rowsum"), options=FAST)
    assert v.status in (Status.accept, Status.repair, Status.structural)
    assert v.metrics is not None and v.metrics.t_candidate_ms > 0 and v.metrics.t_library_ms > 0
    assert 0 < v.metrics.u_library <= 1.1
    assert v.kernels and v.kernels[0].target == "cuda:90" and v.kernels[0].registers


def test_illegal_address_is_a_reject_and_the_gate_serves_on():
    v = screen(Candidate(source=fixture_source("illegal_address.py"), entry="kernel"), Problem.op("rowsum"),
               options=FAST)
    assert v.status is Status.reject
    assert v.reason in (Reason.runtime_error, Reason.crash)
    assert "illegal" in v.failure.message.lower()
    again = screen(Candidate(source=fixture_source("rowsum_good.py"), entry="kernel"), Problem.op("rowsum"),
                   options=FAST)
    assert again.status is not Status.reject


def test_partial_write_is_caught_on_the_gpu():
    v = screen(Candidate(source=fixture_source("partial_write.py"), entry="kernel"), Problem.op("rowsum"), options=FAST)
    assert v.status is Status.reject and v.reason is Reason.nonfinite_output


def test_autotuned_kernel_is_tuned_then_described_by_the_chosen_config():
    v = screen(Candidate(source=(EXAMPLES / "triton" / "gelu_autotuned.py").read_text()), Problem.op("gelu"),
               options=FAST)
    assert v.status is not Status.reject, v.failure
    assert v.metrics is not None and v.numerics.passed
    (kernel,) = v.kernels
    assert kernel.launches == 1  # the tuning launches are not counted as the candidate's
    assert not any("autotuned" in n for n in v.notes)


def test_ncu_pass_counts_the_dram_bytes_of_a_streaming_kernel():
    if ncu.find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed on this GPU machine")
    v = screen(Candidate(source=fixture_source("rowsum_good.py"), entry="kernel"), Problem.op("rowsum"),
               options=FAST.model_copy(update={"ncu": True}))
    assert v.ncu is not None, v.notes
    # a row sum reads its input once: the traffic is about the compulsory bytes
    assert 0.8 <= v.metrics.dram_bytes / v.metrics.bytes_compulsory <= 1.5, v.ncu
