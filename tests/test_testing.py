"""kernelgate.testing: assert_accepted passes a good kernel (untimed on CPU) and fails a wrong one with its
feedback; FakeRunner, the one fake worker the tests use, returns what it is scripted to."""

from __future__ import annotations

import pytest

from kernelgate.errors import WorkerError
from kernelgate.gate import screen
from kernelgate.models import Candidate, Problem, Reason, Status
from kernelgate.testing import FakeRunner, assert_accepted, fake_measurement
from tests.canned import SOURCE, scaled
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


def _layernorm(name: str) -> tuple:
    return SOURCE.format(tag=name) + "\n", Problem.op("layernorm", rows=4096, cols=4096)


def test_untimed_can_be_refused_and_repair_always_fails():
    m = fake_measurement(None)  # numerics passed, nothing timed, no GPU
    m.environment.device = None
    source, problem = _layernorm("u")
    untimed = assert_accepted(source, problem, entry="layernorm", runner=FakeRunner(m))
    assert untimed.status.value == "untimed"
    with pytest.raises(AssertionError, match="allow_untimed_on_cpu=False"):
        assert_accepted(source, problem, entry="layernorm", runner=FakeRunner(m), allow_untimed_on_cpu=False)
    on_gpu = fake_measurement(None)  # the same, but a GPU was there: untimed is not good enough
    with pytest.raises(AssertionError, match="untimed: a GPU was present"):
        assert_accepted(source, problem, entry="layernorm", runner=FakeRunner(on_gpu))
    with pytest.raises(AssertionError, match="repair.*\n.*feedback: Correct but slow.*\n.*finding: unexplained_gap"):
        assert_accepted(source, problem, entry="layernorm", runner=FakeRunner(fake_measurement(scaled(3.0))))
    assert assert_accepted(source, problem, entry="layernorm",
                           runner=FakeRunner(fake_measurement(scaled(1.0)))).status.value == "accept"


# --- FakeRunner, the one fake worker ----------------------------------------------------------


def test_fake_runner_records_jobs_and_returns_copies():
    runner = FakeRunner(fake_measurement(scaled(1.0)), seconds={"job": 0.25})
    source, problem = _layernorm("a")
    first = screen(Candidate(source=source, entry="layernorm", name="a"), problem, runner=runner)
    second = screen(Candidate(source=source, entry="layernorm", name="b"), problem, runner=runner)
    assert [j.candidate.name for j in runner.jobs] == ["a", "b"] and runner.jobs[0].problem == problem
    assert first.status is second.status is Status.accept and first.seconds["job"] == 0.25
    assert runner.measurement.notes == []  # the verdict's pipeline wrote to a copy, never to the script


def test_fake_runner_scripts_per_candidate_and_faults():
    def measure(job):
        return fake_measurement(None, failure=Reason.numerics_mismatch) if job.candidate.name == "bad" else \
            fake_measurement(scaled(3.0))

    runner = FakeRunner(measure, faults=1, fault_for={"dead"})
    source, problem = _layernorm("x")
    with pytest.raises(WorkerError, match="faults"):
        screen(Candidate(source=source, entry="layernorm", name="ok"), problem, runner=runner)
    assert screen(Candidate(source=source, entry="layernorm", name="ok"), problem, runner=runner).status is Status.repair
    bad = screen(Candidate(source=source, entry="layernorm", name="bad"), problem, runner=runner)
    assert bad.status is Status.reject and bad.reason is Reason.numerics_mismatch
    for _ in range(2):
        with pytest.raises(WorkerError, match="dead"):
            screen(Candidate(source=source, entry="layernorm", name="dead"), problem, runner=runner)
    with pytest.raises(AssertionError, match="unreachable"):
        FakeRunner(unreachable=True).run(runner.jobs[0])
    lane = FakeRunner(start_error=RuntimeError("no lane"))
    with pytest.raises(RuntimeError, match="no lane"):
        lane.start()
    assert lane.started and not lane.closed


def test_fake_runner_is_a_screen_many_lane():
    from kernelgate.many import screen_many

    source, problem = _layernorm("m")
    lanes = [FakeRunner(fake_measurement(scaled(1.0)), name="a", fault_for={"c1"}),
             FakeRunner(fake_measurement(scaled(1.0)), name="b", fault_for={"c1"})]
    cands = [Candidate(source=source, entry="layernorm", name=f"c{i}") for i in range(4)]
    results = sorted(screen_many(cands, problem, lanes=lanes), key=lambda r: r.index)
    assert [r.verdict.status if r.verdict else r.error for r in results][0] is Status.accept
    assert results[1].verdict is None and "worker fault, twice" in results[1].error and results[1].attempts == 2
    assert all(lane.started and lane.closed for lane in lanes)
    assert sum(len(lane.jobs) for lane in lanes) == 5  # c1 twice
