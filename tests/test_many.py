"""screen_many: lanes per device, verdicts streamed, none lost or duplicated, faults retried once."""

from __future__ import annotations

import threading

from kernelgate import Candidate, Problem, Reason, Status
from kernelgate.errors import WorkerError
from kernelgate.many import screen_many
from tests import canned
from tests.conftest import fixture_source

PROBLEM = Problem.op("rowsum", rows=8, cols=128)


def test_two_device_lanes_with_real_workers():
    """Two lanes as on a 2-GPU machine (on the CPU, CUDA_VISIBLE_DEVICES is all that differs):
    each worker sees only its lane's device, a crash costs only its own candidate, and every
    candidate comes back exactly once."""
    names = ["report_visible_device.py", "rowsum_good.py", "crash_segfault.py", "report_visible_device.py",
             "wrong_values.py"]
    items = [(Candidate(source=fixture_source(n), entry="kernel", name=n), PROBLEM) for n in names]
    results = list(screen_many(items, devices=["0", "1"]))
    assert sorted(r.index for r in results) == list(range(len(names)))
    by_index = {r.index: r for r in results}
    for index in (0, 3):
        r = by_index[index]
        assert r.verdict.reason is Reason.runtime_error
        assert f"visible devices: {r.lane.removeprefix('cuda:')}" in r.verdict.failure.message
    assert by_index[1].verdict.status is not Status.reject
    assert by_index[2].verdict.reason is Reason.crash
    assert by_index[4].verdict.reason is Reason.numerics_mismatch
    assert {r.lane for r in results} == {"cuda:0", "cuda:1"}
    assert all(r.error is None and r.attempts == 1 for r in results)


class _FakeLane:
    """A lane with canned measurements; ``faults`` WorkerErrors come first."""

    def __init__(self, name: str, faults: int = 0) -> None:
        self.name, self.faults, self.jobs = name, faults, []
        self.started = self.closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        self.started = True

    def run(self, job):
        with self._lock:
            self.jobs.append(job.candidate.name)
            if self.faults:
                self.faults -= 1
                raise WorkerError("worker failed to start: canned")
        return canned.CannedRunner(canned.measurement(canned.scaled(1.0))).run(job)

    def close(self) -> None:
        self.closed = True


def _candidates(n: int) -> list[Candidate]:
    return [Candidate(source=canned.SOURCE.format(tag=i), entry="layernorm", name=f"c{i}") for i in range(n)]


def test_streams_every_candidate_once_over_lanes():
    lanes = [_FakeLane("a"), _FakeLane("b"), _FakeLane("c")]
    problem = Problem.op("layernorm", rows=canned.ROWS, cols=canned.COLS)
    results = list(screen_many(_candidates(20), problem, lanes=lanes))
    assert sorted(r.index for r in results) == list(range(20))
    assert all(r.verdict.status is Status.accept for r in results)
    assert sum(len(lane.jobs) for lane in lanes) == 20
    assert all(lane.started and lane.closed for lane in lanes)


def test_a_worker_fault_is_retried_once_then_reported():
    problem = Problem.op("layernorm", rows=canned.ROWS, cols=canned.COLS)
    (once,) = screen_many(_candidates(1), problem, lanes=[_FakeLane("a", faults=1)])
    assert once.verdict is not None and once.attempts == 2 and once.error is None
    (twice,) = screen_many(_candidates(1), problem, lanes=[_FakeLane("a", faults=2)])
    assert twice.verdict is None and twice.attempts == 2 and "worker fault, twice" in twice.error


def test_a_missing_problem_is_an_error_not_a_lost_candidate():
    results = list(screen_many(_candidates(2), None, lanes=[_FakeLane("a")]))
    assert sorted(r.index for r in results) == [0, 1]
    assert all(r.verdict is None and "no problem" in r.error for r in results)


def test_no_candidates_starts_nothing():
    lane = _FakeLane("a")
    assert list(screen_many([], PROBLEM, lanes=[lane])) == [] and not lane.started


def test_plugin_registry_loads_once_under_threads(monkeypatch):
    """Lanes call detect_dsl from several threads at once: none may see a half-filled registry."""
    import importlib

    from kernelgate import dsl

    slow_import = importlib.import_module

    def import_module(name, *args):
        if name.startswith("kernelgate.dsl."):
            threading.Event().wait(0.05)  # widen the window a racing thread would slip through
        return slow_import(name, *args)

    monkeypatch.setattr(dsl, "_REGISTRY", {})
    monkeypatch.setattr(dsl, "_loaded", False)
    monkeypatch.setattr(dsl.importlib, "import_module", import_module)
    source = fixture_source("rowsum_good.py")
    found: list = []
    threads = [threading.Thread(target=lambda: found.append(dsl.detect_dsl(source))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == ["triton"] * 8
