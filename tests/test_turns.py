"""Turns on one GPU: preparation overlaps, a timing runs alone; real workers in a concurrent lane."""

from __future__ import annotations

import threading
import time

import pytest

from kernelgate import Candidate, Problem, Status
from kernelgate.errors import WorkerError
from kernelgate.many import Lane, screen_many
from kernelgate.models import Measurement
from kernelgate.turns import GpuTurns
from kernelgate.worker import Job, TurnPool, WorkerResult
from tests import canned
from tests.conftest import fixture_source


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_waiting_timing_goes_before_new_preparation():
    turns = GpuTurns()
    turns.acquire_shared()  # a worker preparing
    order: list[str] = []
    timing = threading.Thread(target=lambda: (turns.acquire_exclusive(), order.append("timing"),
                                              turns.release_exclusive()))
    timing.start()
    while turns.state()[2] == 0:  # the timing now waits
        time.sleep(0.005)
    late = threading.Thread(target=lambda: (turns.acquire_shared(), order.append("late shared"),
                                            turns.release_shared()))
    late.start()
    time.sleep(0.1)
    assert order == []  # neither may start while the first worker prepares
    turns.release_shared()
    timing.join(5)
    late.join(5)
    assert order == ["timing", "late shared"]
    assert turns.state() == (0, False, 0)


def test_releasing_a_turn_not_held_is_an_error():
    turns = GpuTurns()
    with pytest.raises(RuntimeError):
        turns.release_shared()
    with pytest.raises(RuntimeError):
        turns.release_exclusive()


class _FakeWorker:
    """Loads (CPU) for ``load_s``, runs numerics for ``prep_s`` and times for ``time_s``; records when."""

    log: list[tuple[str, int, float, float]] = []
    lock = threading.Lock()

    def __init__(self, env=None, load_s: float = 0.15, prep_s: float = 0.05, time_s: float = 0.02,
                 fail: bool = False) -> None:
        self.load_s, self.prep_s, self.time_s, self.fail = load_s, prep_s, time_s, fail

    def wait_ready(self, timeout: float, before_gpu=None) -> None:
        time.sleep(0.01)  # imports: no turn
        if before_gpu is not None:
            before_gpu()
        time.sleep(0.005)  # the CUDA context: in a turn

    def close(self) -> None:
        pass

    def pause(self) -> None:
        self.paused_at = time.perf_counter()

    def resume(self) -> None:
        with self.lock:
            self.log.append(("paused", self.ident, self.paused_at, time.perf_counter()))

    def _spell(self, kind: str, ident: int, seconds: float) -> None:
        began = time.perf_counter()
        time.sleep(seconds)
        with self.lock:
            self.log.append((kind, ident, began, time.perf_counter()))

    ident = -1

    def run(self, job: Job, on_phase=None) -> WorkerResult:
        ident = self.ident = int(job.candidate.name)
        on_phase("load")
        self._spell("load", ident, self.load_s if ident % 2 else 0.01)  # a long build beside short ones
        on_phase("run")
        self._spell("numerics", ident, self.prep_s / 2)
        on_phase("run")  # a checkpoint between the numerics' parts
        self._spell("numerics", ident, self.prep_s / 2)
        if self.fail:
            raise WorkerError("canned: the worker died")
        on_phase("artifacts")
        on_phase("timing")
        self._spell("timing", ident, self.time_s)
        return WorkerResult(measurement=Measurement(), exit="ok",
                            seconds={"fraction": job.options.gpu_memory_fraction})


def _job(i: int) -> Job:
    return Job(candidate=Candidate(source=canned.SOURCE.format(tag=i), entry="layernorm", name=str(i)),
               problem=Problem.op("rowsum", rows=8, cols=128))


def test_turn_pool_times_each_job_alone_while_preparation_overlaps():
    _FakeWorker.log = []
    pool = TurnPool(4, worker_factory=_FakeWorker)
    results: list[WorkerResult] = []
    jobs = [_job(i) for i in range(12)]

    def serve() -> None:  # as screen_many does: each of 4 threads takes the next job when it is free
        while jobs:
            try:
                job = jobs.pop(0)
            except IndexError:
                return
            results.append(pool.run(job))

    threads = [threading.Thread(target=serve) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 12 and pool.turns.state() == (0, False, 0)
    spells = {kind: [(a, b, i) for k, i, a, b in _FakeWorker.log if k == kind] for kind in ("load", "numerics", "timing")}
    for a, b, i in spells["timing"]:  # no other numerics or timing ran during a timing
        assert not any(_overlaps((a, b), (c, d)) for c, d, j in spells["timing"] + spells["numerics"] if j != i)
    numerics = spells["numerics"]
    assert any(_overlaps(p[:2], q[:2]) for p in numerics for q in numerics if p[2] != q[2])  # numerics overlapped
    # loading is CPU work: it takes no turn, but a worker loading while another times is stopped meanwhile
    overlapping = [(p, q) for p in spells["load"] for q in spells["timing"] if p[2] != q[2] and _overlaps(p[:2], q[:2])]
    assert overlapping
    paused = [(a, b, i) for k, i, a, b in _FakeWorker.log if k == "paused"]
    for load, timing in overlapping:
        assert any(i == load[2] and a <= timing[0] + 0.005 and b >= timing[1] - 0.005 for a, b, i in paused)
    # the waits are reported; every worker has the whole GPU memory fraction (an out-of-memory runs alone)
    assert all(r.seconds["fraction"] == pytest.approx(0.85) for r in results)
    assert all({"worker_start", "turn_wait", "timing_wait"} <= set(r.seconds) for r in results)


def test_a_waiting_timing_runs_between_the_parts_of_anothers_numerics():
    spans: dict[str, list[tuple[float, float]]] = {"a_numerics": [], "b_timing": []}
    a_in_first_part = threading.Event()

    class _Scripted(_FakeWorker):
        def run(self, job, on_phase=None):
            name = job.candidate.name
            on_phase("load")
            on_phase("run")
            if name == "0":  # long numerics in two parts
                began = time.perf_counter()
                a_in_first_part.set()
                time.sleep(0.3)
                spans["a_numerics"].append((began, time.perf_counter()))
                on_phase("run")
                began = time.perf_counter()
                time.sleep(0.3)
                spans["a_numerics"].append((began, time.perf_counter()))
            else:  # short numerics, then a timing that must wait for a's first part only
                a_in_first_part.wait(5)
            on_phase("timing")
            began = time.perf_counter()
            time.sleep(0.05)
            if name == "1":
                spans["b_timing"].append((began, time.perf_counter()))
            return WorkerResult(measurement=Measurement(), exit="ok")

    pool = TurnPool(2, worker_factory=_Scripted)
    threads = [threading.Thread(target=pool.run, args=(_job(i),)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    (first, second), (timing,) = spans["a_numerics"], spans["b_timing"]
    assert first[1] <= timing[0] + 0.005 and timing[1] <= second[0] + 0.005
    assert pool.turns.state() == (0, False, 0)


class _Hungry(_FakeWorker):
    """Out of GPU memory on the pool's first attempt, through on the next (its job run alone)."""

    attempts: list[str] = []

    def run(self, job, on_phase=None):
        from kernelgate.models import Failure, Reason

        self.attempts.append(job.candidate.name)
        on_phase("load")
        on_phase("run")
        if len(self.attempts) == 1:
            return WorkerResult(measurement=Measurement(failure=Failure(
                reason=Reason.out_of_memory, stage="numerics", message="CUDA out of memory")), exit="ok")
        on_phase("timing")
        return WorkerResult(measurement=Measurement(), exit="ok")


def test_out_of_memory_beside_others_runs_again_alone():
    _Hungry.attempts = []
    pool = TurnPool(3, worker_factory=_Hungry)
    result = pool.run(_job(7))
    assert _Hungry.attempts == ["7", "7"] and result.measurement.failure is None and result.seconds["run_alone"] == 1
    assert pool.turns.state() == (0, False, 0)


def test_turn_pool_gives_its_turn_back_when_a_worker_fails():
    pool = TurnPool(2, worker_factory=lambda env=None: _FakeWorker(fail=True), spares=0)
    with pytest.raises(WorkerError):
        pool.run(_job(0))
    assert pool.turns.state() == (0, False, 0)
    _FakeWorker.log = []
    pool._new_worker = _FakeWorker
    assert pool.run(_job(1)).exit == "ok"  # and the next job is served


def test_workers_are_started_ahead_and_a_dead_spare_is_replaced():
    made: list[_FakeWorker] = []

    class _Counted(_FakeWorker):
        closed = False

        def __init__(self, env=None) -> None:
            super().__init__(env)
            self.dead = not made  # the first spare dies while it waits
            made.append(self)

        def wait_ready(self, timeout: float, before_gpu=None) -> None:
            if self.dead:
                raise WorkerError("canned: the spare died while it waited")
            super().wait_ready(timeout, before_gpu)

        def close(self) -> None:
            self.closed = True

    pool = TurnPool(2, worker_factory=_Counted)
    assert len(made) == 2 and pool.turns.state() == (0, False, 0)  # started ahead, before any job
    assert pool.run(_job(1)).exit == "ok"  # served by a new worker in the dead spare's place
    assert made[0].closed and len(made) == 4  # the dead spare, the other spare, the refill, the stand-in
    pool.close()
    assert made[1].closed and made[2].closed and not made[3].closed  # the spares left are ended


def test_concurrent_lane_with_real_workers_on_the_cpu():
    """Two candidates in flight in one lane, each in its own real worker; every index once."""
    problem = Problem.op("rowsum", rows=8, cols=128)
    names = ["rowsum_good.py", "wrong_values.py", "rowsum_good.py"]
    items = [(Candidate(source=fixture_source(n), entry="kernel", name=n), problem) for n in names]
    results = list(screen_many(items, lanes=[Lane(name="cpu:0", concurrency=2)]))
    assert sorted(r.index for r in results) == [0, 1, 2]
    by_index = {r.index: r for r in results}
    assert by_index[0].verdict.status is not Status.reject and by_index[2].verdict.status is not Status.reject
    assert by_index[1].verdict.status is Status.reject
    assert all("turn_wait" in r.stage_seconds for r in results)


def test_a_real_worker_can_be_stopped_and_resumed_without_losing_its_job():
    from kernelgate.worker import Worker

    worker = Worker()
    try:
        worker.wait_ready(120)
        worker.pause()

        def state() -> str:
            with open(f"/proc/{worker.proc.pid}/stat") as stat:
                return stat.read().split(")")[1].split()[0]

        deadline = time.monotonic() + 5  # the signal is delivered asynchronously
        while state() != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state() == "T"  # stopped
        time.sleep(0.3)
        worker.resume()
        assert worker.paused_seconds >= 0.3
        problem = Problem.op("rowsum", rows=8, cols=128)
        job = Job(candidate=Candidate(source=fixture_source("rowsum_good.py"), entry="kernel", dsl="triton"),
                  problem=problem)
        result = worker.run(job)
        assert result.exit == "ok" and result.measurement.failure is None
    finally:
        worker.close()


def test_a_judge_out_of_memory_runs_again_alone_once_no_other_job_is_in_flight():
    """The judge's own CUDA OOM (a WorkerError: the gate's fault, not the candidate's) beside other
    jobs is retried alone, and alone means no other job's processes exist: the retry waits for the
    jobs in flight to end, and no job starts until it is done."""
    from kernelgate.worker.supervisor import WorkerError

    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    class _Judge(_FakeWorker):
        def run(self, job, on_phase=None):
            name = job.candidate.name
            with lock:
                first = not any(n == name for n, _ in events)
                events.append((name, "start"))
            on_phase("load")
            on_phase("run")
            if name == "0" and first:
                time.sleep(0.2)  # the others are in flight by now
                with lock:
                    events.append((name, "oom"))
                raise WorkerError("the judge failed (a fault of the gate, not of the candidate): OutOfMemoryError: "
                                  "CUDA out of memory. Tried to allocate 6.00 GiB")
            time.sleep(0.3 if name != "0" else 0.05)
            on_phase("timing")
            with lock:
                events.append((name, "end"))
            return WorkerResult(measurement=Measurement(), exit="ok")

    pool = TurnPool(3, worker_factory=_Judge)
    results: dict[str, object] = {}

    def go(i: int) -> None:
        results[str(i)] = pool.run(_job(i))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    threads[0].start()
    time.sleep(0.02)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(30)
    assert results["0"].seconds["run_alone"] == 1 and results["0"].measurement.failure is None
    retry = [i for i, e in enumerate(events) if e == ("0", "start")][1]
    others_end = [i for i, e in enumerate(events) if e[0] != "0" and e[1] == "end"]
    assert len(others_end) == 2 and all(i < retry for i in others_end), events  # the retry ran with no one beside it
    assert pool.turns.state() == (0, False, 0)


def test_a_worker_error_that_is_not_memory_is_not_retried():
    from kernelgate.worker.supervisor import WorkerError

    class _Broken(_FakeWorker):
        def run(self, job, on_phase=None):
            raise WorkerError("the judge failed: ValueError: something else")

    with pytest.raises(WorkerError):
        TurnPool(2, worker_factory=_Broken).run(_job(1))


def test_a_job_run_again_alone_does_not_wait_on_a_spare_it_stopped():
    """A job run alone takes the exclusive turn (stopping every other worker, spares included)
    before it chooses its worker; the spare it then takes must run, or it never says it is ready
    (the pool stalled on the H100, 2026-12-06, once a KernelBench problem ran out of memory beside
    others)."""

    class _Stoppable(_Hungry):
        """Like a real worker: a stopped process does not get ready (here: gives up after 3 s)."""

        def __init__(self, env=None) -> None:
            super().__init__(env)
            self.stopped = threading.Event()

        def pause(self) -> None:
            self.stopped.set()

        def resume(self) -> None:
            self.stopped.clear()

        def wait_ready(self, timeout: float, before_gpu=None) -> None:
            if before_gpu is not None:
                before_gpu()
            limit = time.monotonic() + 3.0
            while self.stopped.is_set():
                if time.monotonic() > limit:
                    raise WorkerError("canned: the worker is stopped and never got ready")
                time.sleep(0.01)

        def run(self, job, on_phase=None):
            assert not self.stopped.is_set(), "the job's own worker runs while stopped"
            return super().run(job, on_phase)

    _Hungry.attempts = []
    pool = TurnPool(2, worker_factory=_Stoppable, spares=2)
    began = time.monotonic()
    result = pool.run(_job(3))
    assert _Hungry.attempts == ["3", "3"] and result.measurement.failure is None and result.seconds["run_alone"] == 1
    assert time.monotonic() - began < 2.5  # not the 3 s of a stopped spare and its stand-in
    assert pool.turns.state() == (0, False, 0)
    pool.close()


def test_a_real_job_out_of_memory_runs_again_alone_beside_real_spares():
    """The same with real worker processes: the spares are really stopped (SIGSTOP) when the job
    run alone takes the exclusive turn, and the one it then takes must be resumed."""
    from kernelgate import ScreenOptions
    from kernelgate.models import Reason

    pool = TurnPool(2)  # real workers; two spares started ahead
    options = ScreenOptions(host_memory_mb=3072, run_timeout_s=60, load_timeout_s=60, startup_timeout_s=60)
    job = Job(candidate=Candidate(source=fixture_source("oom_host.py"), entry="kernel", dsl="triton"),
              problem=Problem.op("rowsum", rows=8, cols=128), options=options)
    results: list = []
    runner = threading.Thread(target=lambda: results.append(pool.run(job)), daemon=True)
    try:
        runner.start()
        runner.join(150)
        assert not runner.is_alive(), "the job run again alone waited on a stopped spare"
        (result,) = results
        assert result.seconds.get("run_alone") == 1
        assert result.measurement.failure is not None and result.measurement.failure.reason is Reason.out_of_memory
    finally:
        for worker in [*pool._live, *pool._idle]:
            worker.resume()
        pool.close()
