"""screen_many_ray on a local Ray (CPU only): every index once, real verdicts, dead tasks retried once.

One local Ray instance (2 CPUs, no dashboard) serves the whole module. Candidates are real and
run through real kernelgate workers inside the Ray tasks; the fault tests replace the task
function with one that kills its Ray worker process, which is what a lost node looks like to the
driver.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from kernelgate import Candidate, KernelgateError, Problem, Reason, ScreenOptions, Status
from kernelgate import ray_pool
from kernelgate.many import summarize
from kernelgate.ray_pool import RayUnavailableError, screen_many_ray
from tests.conftest import fixture_source

PROBLEM = Problem.op("rowsum", rows=8, cols=128)


def _candidate(name: str) -> Candidate:
    return Candidate(source=fixture_source(name), entry="kernel", name=name)


def test_without_ray_the_error_is_clear_and_immediate(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(RayUnavailableError, match=r"pip install 'kernelgate\[ray\]'") as info:
        screen_many_ray([_candidate("rowsum_good.py")], PROBLEM)  # raised at the call, before iterating
    assert isinstance(info.value, KernelgateError)
    with pytest.raises(RayUnavailableError):
        screen_many_ray([], PROBLEM)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """A local Ray on 2 CPUs for this module; its workers use a private kernelgate cache dir (yielded).

    Ray's processes inherit the environment of ``ray.init``; the per-test ``clean_environ`` later
    points this process elsewhere, which they do not see.
    """
    import os

    ray = pytest.importorskip("ray", reason="the ray extra is not installed (scripts/setup.sh installs it)")
    saved = os.environ.get("KERNELGATE_CACHE_DIR")
    cache_dir = str(tmp_path_factory.mktemp("kgcache"))
    os.environ["KERNELGATE_CACHE_DIR"] = cache_dir  # inherited by Ray's workers, and their kernelgate workers
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield cache_dir
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("KERNELGATE_CACHE_DIR", None)
        else:
            os.environ["KERNELGATE_CACHE_DIR"] = saved


def test_real_candidates_come_back_once_each_with_their_verdicts(local_ray, tmp_path):
    names = ["rowsum_good.py", "wrong_values.py", "crash_segfault.py", "syntax_error.py"]
    items: list = [(_candidate(n), PROBLEM) for n in names]
    items.append(_candidate("rowsum_good.py"))  # no problem anywhere: an error, not a lost candidate
    options = ScreenOptions(compile_cache_dir=str(tmp_path / "cc"))
    began = time.perf_counter()
    results = list(screen_many_ray(items, options=options))
    elapsed = time.perf_counter() - began
    assert sorted(r.index for r in results) == [0, 1, 2, 3, 4]
    by_index = {r.index: r for r in results}
    good = by_index[0]
    assert good.error is None and good.verdict.status in (Status.untimed, Status.repair)
    assert good.verdict.numerics.passed and good.verdict.timing is None  # no GPU in this Ray: nothing timed
    assert by_index[1].verdict.reason is Reason.numerics_mismatch
    assert by_index[2].verdict.reason is Reason.crash  # the candidate's segfault, contained in its worker
    assert by_index[3].verdict.reason is Reason.syntax_error
    assert by_index[4].verdict is None and "no problem" in by_index[4].error
    for r in (by_index[i] for i in range(4)):
        assert r.lane.startswith("ray:") and r.lane.endswith("/cpu") and r.attempts == 1
        assert r.stage_seconds == r.verdict.seconds and 0 <= r.seconds <= elapsed
    assert {"load", "numerics", "artifacts", "job", "total"} <= set(good.stage_seconds)
    summary = summarize(results)
    assert summary["candidates"] == 5 and summary["by_status"]["error"] == 1
    assert summary["by_reason"] == {"crash": 1, "numerics_mismatch": 1, "syntax_error": 1}
    assert 0 < summary["wall_seconds"] <= elapsed


def test_arguments_are_checked_and_no_items_submit_nothing(local_ray):
    with pytest.raises(ValueError, match="num_gpus_per_task"):
        screen_many_ray([_candidate("syntax_error.py")], PROBLEM, num_gpus_per_task=-1)
    assert list(screen_many_ray([], PROBLEM)) == []


def _dying_task(marker_dir: str, deaths: int):
    """A task function that kills its Ray worker process on its first ``deaths`` runs, then screens."""
    real = ray_pool._screen_task  # pickled by reference: the Ray worker imports the real one

    def task(candidate_json, problem_json, policy_json, options_json, gpu):
        import os
        from pathlib import Path

        runs = Path(marker_dir)
        done = len(list(runs.iterdir()))
        (runs / f"run{done}").touch()
        if done < deaths:
            os._exit(1)  # the worker process dies mid-task, as on a lost node
        return real(candidate_json, problem_json, policy_json, options_json, gpu)

    return task


def test_a_task_whose_worker_dies_is_retried_once(local_ray, monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(ray_pool, "_screen_task", _dying_task(str(runs), deaths=1))
    (result,) = screen_many_ray([(_candidate("syntax_error.py"), PROBLEM)])  # screened without a worker: fast
    assert result.verdict.reason is Reason.syntax_error and result.error is None
    assert result.attempts == 2 and len(list(runs.iterdir())) == 2


def test_a_task_that_dies_twice_is_reported_as_an_error(local_ray, monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setattr(ray_pool, "_screen_task", _dying_task(str(runs), deaths=99))
    (result,) = screen_many_ray([(_candidate("syntax_error.py"), PROBLEM)])
    assert result.verdict is None and result.attempts == 2 and result.lane == "ray"
    assert result.error.startswith("ray task failed twice: ") and "Crashed" in result.error
    assert len(list(runs.iterdir())) == 2


def _our_kernelgate_workers(cache_dir: str, module: str = "kernelgate.worker.judge") -> dict[int, Path]:
    """Live kernelgate worker processes started under this module's Ray (found by their cache dir),
    with their work dirs (``python -m kernelgate.worker.judge FD WORKDIR``)."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if module.encode() in args and f"KERNELGATE_CACHE_DIR={cache_dir}".encode() in environ:
            found[int(proc.name)] = Path(args[args.index(module.encode()) + 2].decode())
    return found


def _wait_for(condition, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes through /proc")
def test_stopping_early_cancels_running_tasks_and_kills_their_workers(local_ray):
    """Two hanging candidates hold both CPUs once the fast one is done; closing the stream cancels
    their tasks, their kernelgate workers are killed, and the CPUs are free for the next run."""
    cache_dir = local_ray
    hang, fast = fixture_source("hang_loop.py"), fixture_source("syntax_error.py")
    items = [(Candidate(source=hang, entry="kernel", name="hang1"), PROBLEM), (Candidate(source=fast), PROBLEM),
             (Candidate(source=hang, entry="kernel", name="hang2"), PROBLEM)]
    stream = screen_many_ray(items)
    first = next(stream)
    assert first.index == 1 and first.verdict.reason is Reason.syntax_error
    def both_hanging() -> bool:  # each worker has its job (the candidate is written to its work dir)
        workers = _our_kernelgate_workers(cache_dir)
        return len(workers) == 2 and all((workdir / "candidate" / "candidate.py").exists()
                                         for workdir in workers.values())

    assert _wait_for(both_hanging, 30)
    stream.close()  # cancels both tasks
    assert _wait_for(lambda: not _our_kernelgate_workers(cache_dir), 15), "a cancelled task left its worker"
    assert _wait_for(lambda: not _our_kernelgate_workers(cache_dir, "kernelgate.worker.candidate"), 15), \
        "a cancelled task left its candidate's process"
    began = time.perf_counter()
    (again,) = screen_many_ray([(Candidate(source=fast, name="after"), PROBLEM)])
    assert again.verdict.reason is Reason.syntax_error
    assert time.perf_counter() - began < 15  # the CPUs are free again
