"""Test data for timed verdicts: a layernorm candidate's source and ``verdict``, which screens it with
``kernelgate.testing.FakeRunner`` (the one fake worker) on a ``fake_measurement``.

The store, ranking and report tests need timed verdicts (accept, repair) that a CPU machine cannot
measure. These go through the real pipeline (roofline, diagnosis, policy, feedback); only the
worker's measurement is scripted.
"""

from __future__ import annotations

from kernelgate.gate import screen
from kernelgate.models import Candidate, Problem, Verdict
from kernelgate.testing import LIBRARY_MS, FakeRunner, fake_measurement

SOURCE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def layernorm(x, w, b):
    return x
# variant {tag}
"""

ROWS = COLS = 4096


def verdict(name: str, candidate_ms: list[float] | None, **kw) -> Verdict:
    """A verdict for candidate ``name`` against the layernorm op at 4096x4096 on a (faked) H200."""
    problem = Problem.op("layernorm", rows=ROWS, cols=COLS)
    cand = Candidate(source=SOURCE.format(tag=name), entry="layernorm", name=name)
    return screen(cand, problem, runner=FakeRunner(fake_measurement(candidate_ms, **kw)))


def scaled(factor: float) -> list[float]:
    return [t * factor for t in LIBRARY_MS]
