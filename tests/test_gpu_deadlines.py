"""GPU-only: a hang costs seconds, on KernelBench's largest level-1 input (6.4 GB), at its shipped shape."""

from __future__ import annotations

import time

import pytest

from kernelgate import Candidate, Problem, Reason, Status, screen
from tests.conftest import FIXTURES

pytestmark = pytest.mark.gpu

RELU = FIXTURES / "kernelbench_all" / "KernelBench" / "level1" / "19_ReLU.py"
TALL = FIXTURES / "kernelbench_all" / "own" / "outer_product_tall.py"

ENDLESS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    i = 0
    while i >= 0:  # a wrong loop bound: never ends on the device
        x = x * 1.0000001
        i += 1
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''


def test_an_endless_kernel_on_a_level1_problem_is_a_run_timeout_within_30_s():
    began = time.perf_counter()
    verdict = screen(Candidate(source=ENDLESS, name="endless_relu"), Problem.file(str(RELU)))
    took = time.perf_counter() - began
    assert verdict.status is Status.reject and verdict.reason is Reason.run_timeout, verdict.summary
    assert took < 30, f"the hang cost {took:.1f} s"


HONEST = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
        return y
'''


def test_an_honest_kernel_on_the_largest_level1_input_is_not_refused_for_the_judges_memory():
    """On an 80 GB H100 (2026-12-06) this problem's candidates ran out of memory beside the judge's
    allocator cache (the judge had allocated 4.5x the 12.9 GB footprint at its peak and kept more)."""
    verdict = screen(Candidate(source=HONEST, name="relu_honest"), Problem.file(str(RELU)))
    assert verdict.reason is not Reason.out_of_memory, verdict.summary
    assert verdict.status is not Status.reject, verdict.summary
    memory = verdict.memory
    assert memory is not None and memory.judge_reserved_peak_bytes is not None
    # the allocator's hold is recorded beside the allocations (it is never less than them)
    assert memory.judge_reserved_peak_bytes >= memory.judge_peak_bytes > 0, memory.model_dump()


HOARDING = HONEST.replace("class ModelNew", '''_HOARD = torch.empty(int(torch.cuda.get_device_properties(0).total_memory * 0.7) // 4, device="cuda")


class ModelNew''')


def test_a_candidate_that_crowds_the_judge_out_of_memory_gets_a_verdict_not_a_gate_fault():
    """It takes 70% of the device at import and computes honestly: the judge's next allocation for a
    12.9 GB problem fails, and the verdict names the candidate's memory beside the footprint."""
    verdict = screen(Candidate(source=HOARDING, name="relu_hoarding"), Problem.file(str(RELU)))
    assert verdict.status is Status.reject and verdict.reason is Reason.out_of_memory, verdict.summary
    assert "the judge could not get the GPU memory" in verdict.failure.message, verdict.failure.message


TALL_MATMUL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, KP)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    c = tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        KP = max(16, triton.next_power_of_2(K))
        _mm[(triton.cdiv(M, 128), triton.cdiv(N, 128))](a, b, c, M, N, K, KP=KP, BM=128, BN=128)
        return c
'''


def test_an_output_dominant_problem_stays_within_the_memory_budget():
    """A 4 GB output from 8 MB of inputs: the library's own output goes before the candidate's slot
    is made (the fp64 one, 8 GB, stays), so the judge's peak beyond the reference's own stays within
    3x the footprint (on an H100, 2026-12-07, such problems measured 4.0x with both held)."""
    verdict = screen(Candidate(source=TALL_MATMUL, name="tall_matmul"), Problem.file(str(TALL)))
    assert verdict.status is not Status.reject, verdict.summary
    assert verdict.memory is not None, verdict.summary
    assert verdict.memory.gate_over_footprint() <= 3.0, verdict.memory.model_dump()


# Honest kernels from the red teams of the memory rule (c11, c12), at each card's edge: where the
# judge's need at a check leaves an honest candidate just enough room.
HONEST_AT_THE_EDGE = [
    # the calibration's output-sized buffer counted as the candidate's in the first trial (c11)
    ("softmax_online_honest.py", "softmax", {"rows": 47104, "cols": 65536}, {"rows": 83968, "cols": 65536}),
    # a transposed copy of the input as a temporary, cached by its allocator between trials (c12)
    ("sum_transposed_workspace_honest.py", "sum", {"batch": 90, "dim1": 16384, "dim2": 4095},
     {"batch": 160, "dim1": 16384, "dim2": 4095}),
    # a textbook three-pass softmax with an fp32 exp buffer the size of its input (c12)
    ("softmax_exp_buffer_honest.py", "softmax", {"rows": 65536, "cols": 43008}, {"rows": 65536, "cols": 75776}),
]


@pytest.mark.parametrize("fixture, op, h100, h200", HONEST_AT_THE_EDGE, ids=[c[0] for c in HONEST_AT_THE_EDGE])
def test_an_honest_kernel_at_the_cards_edge_is_not_blamed_for_memory_it_does_not_hold(fixture, op, h100, h200):
    import torch

    shape = h200 if torch.cuda.get_device_properties(0).total_memory > (100 << 30) else h100
    verdict = screen(Candidate(source=(FIXTURES / fixture).read_text(), entry="kernel", name=fixture),
                     Problem.op(op, **shape))
    assert verdict.reason is not Reason.out_of_memory, verdict.summary
    assert verdict.status is not Status.reject, verdict.summary
