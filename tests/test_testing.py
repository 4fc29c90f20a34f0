"""kernelgate.testing.assert_accepted: passes a good kernel (untimed on CPU), fails a wrong one with its feedback."""

from __future__ import annotations

import pytest

import kernelgate.gate
from kernelgate.models import Problem
from kernelgate.testing import assert_accepted
from tests.canned import CannedRunner, measurement, scaled, verdict
from tests.conftest import EXAMPLES, FIXTURES

ROWSUM = Problem.op("rowsum", rows=8, cols=128)
KB = EXAMPLES / "kernelbench"


def test_good_kernel_passes_untimed_on_cpu():
    problem = Problem.file(str(KB / "KernelBench" / "level1" / "1_Sum_over_last_dim.py"))
    v = assert_accepted(KB / "runs" / "triton_demo" / "level_1_problem_1_sample_0_kernel.py", problem)
    assert v.status.value in ("untimed", "accept") and v.numerics.passed


def test_wrong_kernel_fails_with_reason_and_feedback():
    with pytest.raises(AssertionError) as info:
        assert_accepted(str(FIXTURES / "wrong_values.py"), ROWSUM, entry="kernel")
    message = str(info.value)
    assert message.startswith("kernel not accepted: wrong_values.py: reject (numerics_mismatch)")
    assert "reason: numerics_mismatch" in message and "feedback: Rejected (numerics_mismatch)." in message


def _fake_screen(result):
    return lambda candidate, problem, **kw: result


def test_untimed_can_be_refused_and_repair_always_fails(monkeypatch):
    m = measurement(None)  # canned: numerics passed, nothing timed, no GPU
    m.environment.device = None
    from kernelgate.gate import screen
    from kernelgate.models import Candidate
    from tests.canned import SOURCE

    untimed = screen(Candidate(source=SOURCE.format(tag="u"), entry="layernorm", name="u.py"),
                     Problem.op("layernorm", rows=4096, cols=4096), runner=CannedRunner(m))
    assert untimed.status.value == "untimed"
    monkeypatch.setattr(kernelgate.gate, "screen", _fake_screen(untimed))
    assert assert_accepted("x = 1\n", ROWSUM) is untimed
    with pytest.raises(AssertionError, match="allow_untimed_on_cpu=False"):
        assert_accepted("x = 1\n", ROWSUM, allow_untimed_on_cpu=False)
    slow = verdict("slow.py", scaled(3.0))
    monkeypatch.setattr(kernelgate.gate, "screen", _fake_screen(slow))
    with pytest.raises(AssertionError, match="repair.*\n.*feedback: Correct but slow.*\n.*finding: unexplained_gap"):
        assert_accepted("x = 1\n", ROWSUM)
