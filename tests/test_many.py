"""screen_many: lanes per device, verdicts streamed, none lost or duplicated, faults retried once."""

from __future__ import annotations

import threading

from kernelgate import Candidate, Problem, Reason, Status
from kernelgate.many import ScreenResult, screen_many, summarize
from kernelgate.testing import FakeRunner, fake_measurement
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
    # seconds per stage come back with each result, the stages apart (no GPU here: no timing stage)
    good = by_index[1].stage_seconds
    assert {"worker_wait", "load", "numerics", "compile", "artifacts", "job", "total"} <= set(good)
    assert "timing" not in good and good == by_index[1].verdict.seconds
    assert good["compile"] <= good["numerics"] <= good["job"] <= good["total"]
    assert "load" in by_index[2].stage_seconds and "artifacts" not in by_index[2].stage_seconds  # crashed in numerics
    assert all(0 < r.finished_at_s and r.seconds <= r.finished_at_s for r in results)
    summary = summarize(results)
    assert summary["candidates"] == 5 and sum(summary["by_status"].values()) == 5
    assert summary["by_status"]["reject"] == 4 and summary["by_reason"] == {
        "crash": 1, "numerics_mismatch": 1, "runtime_error": 2}
    assert summary["wall_seconds"] == max(r.finished_at_s for r in results)
    assert summary["by_lane"].keys() == {"cuda:0", "cuda:1"} and summary["retried"] == 0


def _lane(name: str, faults: int = 0, measure=None) -> FakeRunner:
    """A lane with scripted measurements (timed at the library's speed unless ``measure(job)`` says);
    its first ``faults`` runs raise ``WorkerError``."""
    return FakeRunner(measure or fake_measurement(canned.scaled(1.0)), seconds={"job": 0.5}, faults=faults, name=name)


def _candidates(n: int) -> list[Candidate]:
    return [Candidate(source=canned.SOURCE.format(tag=i), entry="layernorm", name=f"c{i}") for i in range(n)]


def test_streams_every_candidate_once_over_lanes():
    lanes = [_lane("a"), _lane("b"), _lane("c")]
    problem = Problem.op("layernorm", rows=canned.ROWS, cols=canned.COLS)
    results = list(screen_many(_candidates(20), problem, lanes=lanes))
    assert sorted(r.index for r in results) == list(range(20))
    assert [r.error for r in results if r.error] == []
    assert all(r.verdict.status is Status.accept for r in results)
    assert sum(len(lane.jobs) for lane in lanes) == 20
    assert all(lane.started and lane.closed for lane in lanes)


def test_a_worker_fault_is_retried_once_then_reported():
    problem = Problem.op("layernorm", rows=canned.ROWS, cols=canned.COLS)
    (once,) = screen_many(_candidates(1), problem, lanes=[_lane("a", faults=1)])
    assert once.verdict is not None and once.attempts == 2 and once.error is None
    (twice,) = screen_many(_candidates(1), problem, lanes=[_lane("a", faults=2)])
    assert twice.verdict is None and twice.attempts == 2 and "worker fault, twice" in twice.error


def test_a_missing_problem_is_an_error_not_a_lost_candidate():
    results = list(screen_many(_candidates(2), None, lanes=[_lane("a")]))
    assert sorted(r.index for r in results) == [0, 1]
    assert all(r.verdict is None and "no problem" in r.error for r in results)


def test_no_candidates_starts_nothing():
    lane = _lane("a")
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


def _staged(job):
    """c<i>: a reject (numerics) for every third, else accepted; load takes 0.1*i s, numerics 2 s."""
    i = int(job.candidate.name[1:])
    m = fake_measurement(canned.scaled(1.0), failure=Reason.numerics_mismatch if i % 3 == 0 else None)
    m.stage_seconds = {"load": 0.1 * i, "numerics": 2.0, "compile": 0.5, "artifacts": 0.25}
    if i % 3:
        m.stage_seconds["timing"] = 1.5
    return m


def test_results_carry_stage_seconds_and_summarize_counts_them():
    problem = Problem.op("layernorm", rows=canned.ROWS, cols=canned.COLS)
    lanes = [_lane("a", measure=_staged), _lane("b", faults=2, measure=_staged)]
    results = list(screen_many(_candidates(9), problem, lanes=lanes))
    assert sorted(r.index for r in results) == list(range(9))
    for r in results:
        if r.verdict is not None:
            assert r.stage_seconds == r.verdict.seconds
            assert r.stage_seconds["load"] == 0.1 * r.index and r.stage_seconds["job"] == 0.5
    errors = [r for r in results if r.error]
    assert len(errors) == 1 and errors[0].stage_seconds == {} and errors[0].attempts == 2  # b's two faults
    summary = summarize(results, wall_seconds=1.8)
    rejects = sum(1 for r in results if r.verdict is not None and r.index % 3 == 0)
    assert summary["candidates"] == 9 and summary["candidates_per_hour"] == 9 * 3600 / 1.8
    assert summary["by_status"] == {"accept": 8 - rejects, "error": 1, "reject": rejects}
    assert summary["by_reason"] == {"numerics_mismatch": rejects}
    stages = summary["median_stage_seconds"]
    assert list(stages)[:5] == ["load", "numerics", "compile", "artifacts", "timing"]  # the pipeline's order
    assert stages["numerics"] == 2.0 and stages["timing"] == 1.5 and stages["job"] == 0.5
    loads = sorted(0.1 * r.index for r in results if r.verdict is not None)
    assert stages["load"] == round((loads[3] + loads[4]) / 2, 4)  # median over the 8 verdicts
    assert summary["retried"] == 1 and sum(summary["by_lane"].values()) == 9
    assert summarize(results)["wall_seconds"] == max(r.finished_at_s for r in results)


def test_summarize_by_hand():
    rs = [ScreenResult(index=0, verdict=None, error="x", lane="a", seconds=3.0, finished_at_s=3.0),
          ScreenResult(index=1, verdict=None, error="y", lane="a", attempts=2, seconds=5.0, finished_at_s=8.0,
                       stage_seconds={"load": 1.0, "custom": 4.0})]
    summary = summarize(rs)
    assert summary == {"candidates": 2, "wall_seconds": 8.0, "candidates_per_hour": 900.0,
                       "by_status": {"error": 2}, "by_reason": {}, "median_seconds": 4.0,
                       "median_stage_seconds": {"load": 1.0, "custom": 4.0}, "by_lane": {"a": 2}, "retried": 1}
    empty = summarize([])
    assert empty["candidates"] == 0 and empty["candidates_per_hour"] is None and empty["median_seconds"] is None
