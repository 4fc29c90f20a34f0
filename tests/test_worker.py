"""Isolation: real worker processes that crash, hang, exit and flood their output."""

from __future__ import annotations

import os
import re

import pytest

from kernelgate import Candidate, Problem, Reason, ScreenOptions, Status, screen
from tests.conftest import fixture_source

SMALL = Problem.op("rowsum", rows=16, cols=256)
QUICK = ScreenOptions(run_timeout_s=8, load_timeout_s=60)


def _screen(name: str, options: ScreenOptions = QUICK):
    return screen(Candidate(source=fixture_source(name), entry="kernel", name=name), SMALL, options=options)


@pytest.mark.parametrize("fixture, reason", [
    ("crash_segfault.py", Reason.crash),
    ("exit_os.py", Reason.crash),
    ("raises.py", Reason.runtime_error),
    ("hang_loop.py", Reason.run_timeout),
])
def test_faults_become_rejects_and_the_gate_serves_the_next(fixture, reason):
    verdict = _screen(fixture)
    assert verdict.status is Status.reject
    assert verdict.reason is reason
    assert verdict.failure.message
    follow_up = _screen("rowsum_good.py")
    assert follow_up.status is not Status.reject


def test_segfault_names_the_signal():
    assert "SIGSEGV" in _screen("crash_segfault.py").failure.message


def test_exception_evidence_points_at_the_candidate_line():
    message = _screen("raises.py").failure.message
    assert "boom from the candidate" in message and "line " in message


def test_candidate_output_cannot_corrupt_the_channel():
    verdict = _screen("prints_noise.py")
    assert verdict.status is not Status.reject
    assert verdict.numerics.passed and len(verdict.numerics.trials) == 5


def test_load_timeout_is_its_own_reason():
    source = "import triton\nimport time\ntime.sleep(60)\n"
    verdict = screen(Candidate(source=source, entry="kernel"), SMALL,
                     options=ScreenOptions(load_timeout_s=3, run_timeout_s=3))
    assert verdict.reason is Reason.load_timeout


_DYING_PARENT = """
import os, sys, threading, time
from kernelgate import Candidate, Problem, ScreenOptions
from kernelgate.worker import Job, Worker
worker = Worker()
worker.wait_ready(120)
print(worker.proc.pid, flush=True)
job = Job(candidate=Candidate(source=sys.stdin.read(), entry="kernel", dsl="triton"),
          problem=Problem.op("rowsum", rows=16, cols=256), options=ScreenOptions(run_timeout_s=600))
threading.Thread(target=worker.run, args=(job,), daemon=True).start()
time.sleep(3)  # the candidate is spinning in its endless loop now
os._exit(0)    # the gate dies without cleaning up
"""


def test_a_worker_exits_when_its_parent_dies():
    """A killed gate (or a lost Ray task) must not leave a candidate running on the machine."""
    import os
    import subprocess
    import sys
    import time

    proc = subprocess.run([sys.executable, "-c", _DYING_PARENT], input=fixture_source("hang_loop.py"),
                          capture_output=True, text=True, timeout=180)
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(child, 9)
    raise AssertionError(f"worker {child} outlived its parent by 10 s")


def test_an_attribute_of_the_runner_instance_replaced_is_tampering():
    # the class is whole again at every checkpoint; the runner's own torch is not
    verdict = _screen("runner_attr_swap.py")
    assert verdict.status is Status.reject and verdict.reason is Reason.tampering, verdict.summary
    assert "Runner.torch" in verdict.failure.message


def test_a_hang_says_where_the_candidate_was():
    message = _screen("hang_loop.py").failure.message
    # its endless loop is lines 18-19 of the source; the dump lands on either, depending on the bytecode it interrupts
    assert re.search(r"the candidate's process was killed \(it was at: candidate\.py:1[89] in kernel <- kernelgate/", message), message


def test_a_stack_is_taken_from_a_blocked_process_and_a_stopped_one_is_named(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from kernelgate.worker import stacks

    dump = tmp_path / "p.stack"
    code = ("import sys, time\nfrom pathlib import Path\nfrom kernelgate.worker import stacks\n"
            "stacks.arm(Path(sys.argv[1]))\nprint('armed', flush=True)\n"
            "def blocked_here():\n    time.sleep(60)\nblocked_here()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(dump)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "armed"
        time.sleep(0.2)
        assert stacks.where(proc.pid, dump).startswith("<string>:7 in blocked_here <- <string>:8 in <module>")
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.2)
        assert stacks.where(proc.pid, dump) == "stopped"
    finally:
        proc.kill()
        proc.wait()
    assert stacks.where(proc.pid, dump) == "gone"


def test_a_judge_that_hangs_is_killed_by_the_supervisor_which_says_where(tmp_path):
    problem = tmp_path / "slow_problem.py"
    problem.write_text("import time\nimport torch\n\n\nclass Model(torch.nn.Module):\n"
                       "    def forward(self, x):\n        return x.sum(dim=1)\n\n\n"
                       "def get_inputs():\n    return [torch.randn(16, 256)]\n\n\n"
                       "def get_init_inputs():\n    time.sleep(120)\n    return []\n")
    verdict = screen(Candidate(source=fixture_source("rowsum_good.py"), entry="kernel"), Problem.file(problem),
                     options=ScreenOptions(load_timeout_s=2, run_timeout_s=2))
    message = verdict.failure.message if verdict.failure else verdict.summary
    assert "the judge was at: slow_problem.py:15 in get_init_inputs" in message, message


def test_a_spare_that_died_while_it_waited_is_replaced_and_the_job_reaches_its_verdict():
    """Red team, H100 2026-12-07: a spare started while the last case's candidate held the device
    died making its CUDA context (exit 1); the next case got "could not hand the job to a worker"."""
    import os
    import signal

    from kernelgate.worker import WorkerPool

    pool = WorkerPool(spares=1)
    try:
        spare = pool._idle[0]
        os.killpg(spare.proc.pid, signal.SIGKILL)
        spare.proc.wait()
        verdict = screen(Candidate(source=fixture_source("rowsum_good.py"), entry="kernel"), SMALL, options=QUICK,
                         runner=pool)
        assert verdict.status is not Status.reject, verdict.summary
    finally:
        pool.close()


def test_a_worker_that_fails_to_start_says_what_the_judge_printed(tmp_path):
    from kernelgate.errors import WorkerError
    from kernelgate.worker import Worker

    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('no CUDA context: out of memory (a stand-in)')\n")
    worker = Worker(env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"})
    try:
        with pytest.raises(WorkerError, match=r"(?s)exit code 1; log: .*no CUDA context: out of memory"):
            worker.wait_ready(60)
    finally:
        worker.close()
