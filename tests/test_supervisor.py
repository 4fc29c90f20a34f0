"""The parent's side: it supervises, receives data, and never imports torch."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import FIXTURES

_SCREEN_IN_A_FRESH_PARENT = """
import sys
from kernelgate import Candidate, Problem, screen
v = screen(Candidate(source=open(sys.argv[1]).read(), entry="kernel"), Problem.op("rowsum", rows=8, cols=128))
print(v.status.value, "torch" in sys.modules)
"""


def test_the_parent_screens_without_importing_torch():
    done = subprocess.run([sys.executable, "-c", _SCREEN_IN_A_FRESH_PARENT, str(FIXTURES / "rowsum_good.py")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    status, torch_loaded = done.stdout.split()[-2:]
    assert status in ("untimed", "repair", "accept")
    assert torch_loaded == "False"


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def test_a_starting_spare_is_stopped_whole_its_candidate_process_included():
    """A pool stops its spares during a timing instead of waiting for them to start: both the
    judge's process and the candidate's (whose pid the judge has not reported yet) stop."""
    import time

    from kernelgate.worker.supervisor import Worker, _children

    worker = Worker()
    try:
        deadline = time.monotonic() + 60
        while not _children(worker.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        candidate = _children(worker.proc.pid)
        assert candidate, "the judge never started its candidate's process"
        assert worker.candidate_pid is None  # not ready yet: the pid comes from the judge's children
        worker.pause()
        time.sleep(0.2)
        assert _state(worker.proc.pid) == "T" and _state(candidate[0]) == "T"
        worker.resume()
        worker.wait_ready(300)  # it goes on starting, and starts
        assert worker.candidate_pid == candidate[0]
    finally:
        worker.close()
