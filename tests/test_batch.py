"""kernelgate.adapters.batch (adapters/batch.py): a KernelBench runs folder screened against a tiny
synthetic checkout with ``FakeRunner`` (no worker processes): which generations are screened, skipped
or found in the log already, what goes to the log and the progress stream, the counts, and the
``eval_results.json`` layout."""

from __future__ import annotations

import io
import shutil

import pytest

from kernelgate.adapters.batch import (
    BatchResult,
    Generation,
    find_generations,
    kernelbench_eval_results,
    screen_runs,
)
from kernelgate.errors import ProblemError
from kernelgate.models import Reason
from kernelgate.store import VerdictLog
from kernelgate.testing import LIBRARY_MS, FakeRunner, fake_measurement
from tests.conftest import EXAMPLES

DEMO = EXAMPLES / "kernelbench"


@pytest.fixture
def layout(tmp_path):
    """A checkout with problems 1..3 of level 1, and a runs folder: problem 1 (samples 0 and 1),
    problem 2 (sample 0), problem 9 (not in the checkout), one level-2 file, and a prompt file."""
    root = tmp_path / "KernelBench-main"
    shutil.copytree(DEMO / "KernelBench", root / "KernelBench", ignore=shutil.ignore_patterns("__pycache__"))
    runs = tmp_path / "runs" / "my_run"
    runs.mkdir(parents=True)
    demo = DEMO / "runs" / "triton_demo"
    for name in ("level_1_problem_1_sample_0_kernel.py", "level_1_problem_1_sample_1_kernel.py",
                 "level_1_problem_2_sample_0_kernel.py", "level_1_problem_1_sample_0_prompt.txt"):
        shutil.copy(demo / name, runs / name)
    shutil.copy(demo / "level_1_problem_1_sample_0_kernel.py", runs / "level_1_problem_9_sample_0_kernel.py")
    shutil.copy(demo / "level_1_problem_1_sample_0_kernel.py", runs / "level_2_problem_1_sample_0_kernel.py")
    (runs / "level_1_problem_3_sample_0_kernel.py").mkdir()  # a folder with a kernel's name: not a generation
    return root, runs


def _scripted(job):
    """Sample 1 of problem 1 computes wrong numbers; every other candidate is as fast as the library."""
    if job.candidate.name == "level_1_problem_1_sample_1_kernel.py":
        return fake_measurement(failure=Reason.numerics_mismatch)
    return fake_measurement(list(LIBRARY_MS))


def test_find_generations(layout):
    _, runs = layout
    gens = find_generations(runs, level=1)
    assert [(g.level, g.problem_id, g.sample_id) for g in gens] == [(1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 9, 0)]
    assert gens[0] == Generation(1, 1, 0, runs / "level_1_problem_1_sample_0_kernel.py")
    assert [(g.level, g.problem_id) for g in find_generations(runs)][-1] == (2, 1)  # all levels, level first
    assert find_generations(runs, level=3) == []
    with pytest.raises(ProblemError, match="runs folder not found"):
        find_generations(runs / "missing")


def test_screen_runs_screens_logs_and_skips(layout, tmp_path):
    root, runs = layout
    runner = FakeRunner(_scripted)
    log = VerdictLog(tmp_path / "kg.sqlite")
    progress = io.StringIO()
    result = screen_runs(root, 1, runs, log=log, runner=runner, progress=progress, backend="triton")
    assert isinstance(result, BatchResult) and result.batch == "my_run"
    assert [(i.generation.problem_id, i.generation.sample_id) for i in result.items] == [(1, 0), (1, 1), (2, 0)]
    assert [j.candidate.name for j in runner.jobs] == [p.name for p in sorted(runs.glob("level_1_problem_[12]_*.py"))]
    statuses = [i.verdict.status.value for i in result.items]
    assert statuses[1] == "reject" and result.items[1].verdict.reason is Reason.numerics_mismatch
    assert statuses[0] == statuses[2] == "accept", [i.verdict.summary for i in result.items]
    assert result.counts() == {"accept": 2, "reject": 1}
    (gen, why), = result.skipped
    assert gen.problem_id == 9 and "no problem 9 in level 1" in why
    assert result.logged == []
    # the log: one row per screened verdict, batch named after the folder
    ids = [i.log_id for i in result.items]
    assert all(isinstance(i, int) for i in ids) and len(set(ids)) == 3
    rows = log.entries(batch="my_run")
    assert sorted(r.id for r in rows) == sorted(ids)
    job = runner.jobs[2]  # the candidate as screened: KernelBench's ids in its metadata, the backend's DSL
    assert job.candidate.dsl == "triton" and job.candidate.metadata == {
        "kernelbench_level": 1, "kernelbench_problem_id": 2, "kernelbench_sample_id": 0,
        "kernelbench_problem": "2_Scale_columns.py"}
    # progress: one line per generation, with its fate
    lines = progress.getvalue().splitlines()
    assert len(lines) == 4 and lines[0].startswith("[1/4] level_1_problem_1_sample_0_kernel.py: accept")
    assert "reject (numerics_mismatch)" in lines[1] and "skipped (no such problem)" in lines[3]


def test_a_second_run_finds_the_log_and_screens_nothing(layout, tmp_path):
    root, runs = layout
    log = VerdictLog(tmp_path / "kg.sqlite")
    first = screen_runs(root, 1, runs, log=log, runner=FakeRunner(_scripted), progress=None)
    again = screen_runs(root, 1, runs, log=log, runner=FakeRunner(unreachable=True), progress=None)
    assert again.items == [] and len(again.logged) == 3
    assert [i.log_id for i in again.logged] == [i.log_id for i in first.items]
    assert [i.verdict.status for i in again.logged] == [i.verdict.status for i in first.items]
    assert len(log.entries(batch="my_run")) == 3  # nothing added
    # kernelbench_eval_results reads the logged verdicts as it does fresh ones
    assert kernelbench_eval_results(again) == kernelbench_eval_results(first)
    # rescreen: screened and logged again
    runner = FakeRunner(_scripted)
    redo = screen_runs(root, 1, runs, log=log, runner=runner, progress=None, rescreen=True, batch="redo")
    assert len(redo.items) == 3 and len(runner.jobs) == 3 and len(log.entries(batch="redo")) == 3


def test_problem_ids_and_no_log(layout):
    root, runs = layout
    runner = FakeRunner(_scripted)
    result = screen_runs(root, 1, runs, runner=runner, problem_ids=[2], progress=None)
    assert [i.generation.problem_id for i in result.items] == [2] and result.items[0].log_id is None
    assert result.skipped == [] and len(runner.jobs) == 1


def test_kernelbench_eval_results_layout(layout):
    root, runs = layout
    result = screen_runs(root, 1, runs, runner=FakeRunner(_scripted), progress=None)
    out = kernelbench_eval_results(result)
    assert sorted(out) == ["1", "2"]  # problem 9 was skipped: not in the results
    assert [s["sample_id"] for s in out["1"]] == [0, 1]
    good, wrong = out["1"]
    assert good["compiled"] and good["correctness"] and good["kernelgate_status"] == "accept"
    assert good["kernelgate_reason"] is None and good["runtime"] > 0 and good["ref_runtime"] > 0
    assert wrong["compiled"] and not wrong["correctness"]
    assert wrong["kernelgate_status"] == "reject" and wrong["kernelgate_reason"] == "numerics_mismatch"
    assert set(good) == {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats",
                         "ref_runtime", "kernelgate_status", "kernelgate_reason"}


def test_a_missing_level_is_a_problem_error(layout):
    root, runs = layout
    with pytest.raises(ProblemError, match="no level 4"):
        screen_runs(root, 4, runs, runner=FakeRunner(unreachable=True), progress=None)
