"""kernelgate.worker.judge: ``exit_with_parent`` with real processes whose parent dies (a bare
watched process, then a real judge started by a real ``Worker``, which also kills its candidate's
process on the way out), and that the judge needs no CUDA (``start_cuda``) on a CPU machine.

An orphan is re-parented to the nearest "subreaper". Each scenario runs under a small script that
makes itself one (``PR_SET_CHILD_SUBREAPER``), so it can collect the orphan's exit status, without
making the pytest process one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import HAS_GPU, ROOT

# The subreaper: starts MIDDLE (argv[1]), which prints {"pids": {name: pid}, ...} once its children are
# set up and then waits for a line on stdin. The subreaper checks that every pid is still alive after
# ALIVE_S (the watch polls every 0.5 s: it must not fire while the parent lives), ends MIDDLE
# (os._exit, no clean-up), and collects each orphan's exit: status and seconds after the parent died.
# Pids in info["kill"] are killed at the end.
SUBREAPER = textwrap.dedent(r'''
    import ctypes, json, os, shutil, subprocess, sys, time

    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    ALIVE_S = 1.5
    middle = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    info = json.loads(middle.stdout.readline())
    pids = info["pids"]

    def state(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None

    time.sleep(ALIVE_S)
    alive_before = {name: state(pid) not in (None, "Z") for name, pid in pids.items()}
    middle.stdin.write("die\n")
    middle.stdin.flush()
    middle.wait()
    died = time.monotonic()
    exits = {}
    for name, pid in pids.items():
        while True:
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped by its own parent (the judge waits for its candidate)
                gone = state(pid) is None
                exits[name] = {"reaped_elsewhere": True, "gone": gone, "seconds": time.monotonic() - died}
                break
            if got == pid:
                exits[name] = {"exitcode": os.waitstatus_to_exitcode(status), "seconds": time.monotonic() - died}
                break
            if time.monotonic() - died > 15:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                exits[name] = {"exitcode": None, "still_running_after_s": 15}
                break
            time.sleep(0.05)
    for pid in info.get("kill", []):  # helpers that had to outlive MIDDLE
        os.kill(pid, 9)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    if info.get("workdir"):
        shutil.rmtree(info["workdir"], ignore_errors=True)
    print(json.dumps({"info": info, "alive_before": alive_before, "exits": exits}))
''')


def _orphan_scenario(tmp_path, middle: str, timeout: float = 90) -> dict:
    script = tmp_path / "subreaper.py"
    script.write_text(SUBREAPER)
    r = subprocess.run([sys.executable, str(script), textwrap.dedent(middle)], capture_output=True, text=True,
                       timeout=timeout, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


WATCHED = textwrap.dedent(r'''
    import os, sys, threading, time
    from pathlib import Path
    from kernelgate.worker.judge import exit_with_parent

    marker = Path(sys.argv[1])
    exit_with_parent(os.getppid(), name="test-parent-watch", before_exit=lambda: marker.write_text("before_exit ran"))
    print(",".join(t.name for t in threading.enumerate()), flush=True)
    time.sleep(60)
    os._exit(0)  # never reached when the watch works
''')


def test_exit_with_parent_exits_70_soon_after_the_parent_dies_and_runs_before_exit(tmp_path):
    marker = tmp_path / "marker.txt"
    middle = f'''
        import json, os, subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {WATCHED!r}, {str(marker)!r}], stdout=subprocess.PIPE,
                                 text=True, cwd={str(ROOT)!r})
        threads = child.stdout.readline().strip().split(",")  # the watch is armed
        print(json.dumps({{"pids": {{"watched": child.pid}}, "threads": threads}}), flush=True)
        sys.stdin.readline()
        os._exit(0)  # the parent dies without waiting for its child
    '''
    out = _orphan_scenario(tmp_path, middle)
    assert "test-parent-watch" in out["info"]["threads"]
    assert out["alive_before"] == {"watched": True}, "the watch fired while its parent was alive"
    exit_ = out["exits"]["watched"]
    assert exit_["exitcode"] == 70, exit_
    assert exit_["seconds"] < 5, exit_  # polls every 0.5 s
    assert marker.read_text() == "before_exit ran"


def test_a_real_judge_whose_parent_dies_kills_its_candidate_and_exits(tmp_path):
    """A ``Worker`` (judge and candidate processes, on this CPU) gets to ``ready``; then the process
    that started it dies. The judge's watch kills the candidate's (stopped) process, waits for it,
    and exits 70.

    A holder process keeps the judge's stdin open past the parent's death: otherwise the judge reads
    EOF where it waits for its job and exits quietly before the watch's next poll (the next test), and
    the watch would go untested."""
    middle = '''
        import json, os, subprocess, sys
        from kernelgate.worker.supervisor import Worker

        w = Worker()
        w.wait_ready(timeout=120)
        fd = w.proc.stdin.fileno()
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(fd,))
        print(json.dumps({"pids": {"judge": w.proc.pid, "candidate": w.candidate_pid}, "kill": [holder.pid],
                          "workdir": str(w.workdir)}), flush=True)
        sys.stdin.readline()
        os._exit(0)
    '''
    out = _orphan_scenario(tmp_path, middle, timeout=150)
    pids = out["info"]["pids"]
    assert pids["candidate"] and pids["candidate"] != pids["judge"]
    assert out["alive_before"] == {"judge": True, "candidate": True}
    judge = out["exits"]["judge"]
    assert judge["exitcode"] == 70 and judge["seconds"] < 5, judge
    # before_exit (CandidateProcess.kill) killed and reaped it in the judge: had the judge died without
    # it, the candidate's process would have become an orphan here (killed by its PDEATHSIG: exit -9)
    candidate = out["exits"]["candidate"]
    assert candidate.get("reaped_elsewhere") and candidate["gone"], candidate


def test_a_judge_whose_stdin_closes_before_a_job_exits_quietly_and_kills_its_candidate():
    """A spare retired by closing its stdin: the judge reads EOF where it waits for its job. It exits
    0 with no traceback in its log and takes its candidate's process with it."""
    from kernelgate.worker.supervisor import Worker

    w = Worker()
    try:
        w.wait_ready(timeout=120)
        candidate = w.candidate_pid
        w.proc.stdin.close()
        assert w.proc.wait(timeout=30) == 0
        log = (w.workdir / "judge.log").read_text()
        assert "Traceback" not in log, log[-2000:]
        for _ in range(100):  # the judge reaped it; /proc may lag a moment
            try:
                with open(f"/proc/{candidate}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                break
            if state == "Z":
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"candidate process {candidate} still alive")
    finally:
        w.close()


@pytest.mark.skipif(HAS_GPU, reason="what the judge does without a GPU")
def test_start_cuda_is_not_needed_on_the_cpu():
    """Without a GPU ``start_cuda`` cannot work (so the judge must skip it, as it does: the real judge
    above reached ``ready`` on this machine), and the blocking-sync set-up reports failure instead
    of raising."""
    code = textwrap.dedent('''
        import json
        from kernelgate.worker.judge import _blocking_sync, start_cuda
        out = {"blocking_sync": _blocking_sync()}
        try:
            start_cuda()
            out["start_cuda"] = "ran"
        except Exception as exc:
            out["start_cuda"] = type(exc).__name__
        print(json.dumps(out))
    ''')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["blocking_sync"] is False
    assert out["start_cuda"] != "ran"
