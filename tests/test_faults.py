"""Fault fixtures: broken, crashing, hanging, exiting, greedy and escaping candidates.

Each gets a reject with its reason, and the gate serves the next candidate: one pool serves the
whole file and the last test screens a good kernel with it. The manifest is tests/hostile_cases.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgate import Candidate, Status, screen
from kernelgate.worker import WorkerPool, child_environment
from tests.conftest import HAS_GPU
from tests.hostile_cases import FAULTS, FIXTURES, OPTIONS, PROBLEM


@pytest.fixture(scope="module")
def pool():
    pool = WorkerPool(spares=1)
    yield pool
    pool.close()


def _params(cases):
    return [pytest.param(c, id=c.name, marks=[pytest.mark.gpu] if c.gpu else []) for c in cases]


@pytest.mark.parametrize("case", _params(FAULTS))
def test_fault_is_rejected_with_its_reason(case, pool):
    verdict = screen(Candidate(source=(FIXTURES / case.fixture).read_text(), entry=case.entry, name=case.name),
                     PROBLEM, options=case.screen_options(), runner=pool)
    assert verdict.status is Status.reject, verdict.summary
    assert case.accepts(verdict.reason, HAS_GPU), (verdict.reason, verdict.failure.message)
    assert verdict.failure.message


def test_write_outside_left_nothing_behind(pool):
    target = Path("/tmp/kernelgate_hostile_write_outside.txt")
    target.unlink(missing_ok=True)
    case = next(c for c in FAULTS if c.name == "write_outside")
    screen(Candidate(source=(FIXTURES / case.fixture).read_text(), entry="kernel"), PROBLEM,
           options=case.screen_options(), runner=pool)
    assert not target.exists()


def test_child_environment_is_clean(tmp_path):
    base = {"PATH": "/usr/bin", "HOME": "/root", "AWS_SECRET_ACCESS_KEY": "x", "CUDA_VISIBLE_DEVICES": "0",
            "TRITON_INTERPRET": "1", "TRITON_API_TOKEN": "t", "KERNELGATE_SEED": "42", "EDITOR": "vi"}
    env = child_environment(base, tmp_path)
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"] == str(tmp_path)
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["PATH"] == "/usr/bin"
    for gone in ("AWS_SECRET_ACCESS_KEY", "TRITON_INTERPRET", "TRITON_API_TOKEN", "KERNELGATE_SEED", "EDITOR"):
        assert gone not in env


def test_good_kernel_is_still_served_after_the_faults(pool):
    verdict = screen(Candidate(source=(FIXTURES / "rowsum_good.py").read_text(), entry="kernel"), PROBLEM,
                     options=OPTIONS, runner=pool)
    assert verdict.status is not Status.reject, verdict.failure and verdict.failure.message
