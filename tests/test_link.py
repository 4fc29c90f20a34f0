"""The judge's handle on the candidate's process: deadlines, deaths and stops, with real processes."""

from __future__ import annotations

import os
import time

import pytest

from kernelgate.worker.link import CandidateProcess, Unanswered
from kernelgate.worker.supervisor import child_environment


@pytest.fixture()
def process(tmp_path):
    proc = CandidateProcess(tmp_path, child_environment(dict(os.environ), tmp_path))
    proc.start(timeout=120)
    yield proc
    proc.kill()


def test_a_ping_is_answered_and_the_process_is_stopped_afterwards(process):
    reply = process.ask({"type": "ping"}, deadline_s=30)
    assert reply.type == "call"
    with open(f"/proc/{process.pid}/stat") as stat:
        assert stat.read().split(")")[1].split()[0] == "T"  # stopped between requests


def test_a_process_that_dies_is_reported_as_such(process):
    os.kill(process.pid, 9)
    with pytest.raises(Unanswered) as caught:
        process.ask({"type": "ping"}, deadline_s=30)
    assert caught.value.why == "died" and "SIGKILL" in caught.value.message


def test_a_request_past_its_deadline_kills_the_process(process, monkeypatch):
    # a check request before load: the runner answers at once; a stopped process cannot
    process.thaw()
    os.kill(process.pid, 19)  # SIGSTOP behind the link's back: it will not answer
    monkeypatch.setattr(process, "thaw", lambda: None)
    began = time.monotonic()
    with pytest.raises(Unanswered) as caught:
        process.ask({"type": "ping"}, deadline_s=1.0)
    assert caught.value.why == "timeout" and time.monotonic() - began < 10
    assert process.proc.poll() is not None


def test_a_candidates_process_dies_with_its_judge_even_when_stopped():
    """A spare closed by the supervisor: the judge gets SIGKILL while its candidate's process is stopped."""
    from kernelgate.worker import Worker

    worker = Worker()
    try:
        worker.wait_ready(120)
        candidate = worker.candidate_pid
        os.killpg(worker.proc.pid, 9)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{candidate}/stat") as stat:
                    if stat.read().split(")")[1].split()[0] == "Z":
                        break
            except FileNotFoundError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the candidate's process outlived its judge")
    finally:
        worker.close()


_BURN = """
import os, sys, threading, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
t = threading.Thread(target=burn, args=(0.3,)); t.start(); t.join()   # a thread's CPU time
if os.fork() == 0:                                                   # a reaped child's
    burn(0.3); os._exit(0)
os.wait()
print("done", flush=True)
time.sleep(30)
"""


def test_group_cpu_seconds_counts_threads_and_reaped_children_of_the_group():
    import subprocess
    import sys

    from kernelgate.worker.link import group_cpu_seconds

    proc = subprocess.Popen([sys.executable, "-c", _BURN], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "done"
        used = group_cpu_seconds(proc.pid)
        assert used >= 0.5, used  # 0.3 s in a thread + 0.3 s in a child, at 10 ms ticks
        assert group_cpu_seconds(proc.pid) - used < 0.05  # asleep now: nothing more accrues
    finally:
        proc.kill()
        proc.wait()
    assert group_cpu_seconds(proc.pid) == 0.0  # a group with no process left counts nothing


def _mapped(pid: int, path: str) -> bool:
    with open(f"/proc/{pid}/maps") as maps:
        return path in maps.read()


def test_a_released_shared_tensor_is_unmapped_by_the_candidate_and_unlinked_by_the_judge(process, tmp_path):
    """The memory budget's mechanism: a request's ``release`` names tensors the candidate's process
    drops; the judge then forgets them (on the CPU their /dev/shm file goes)."""
    import torch

    from kernelgate.worker.protocol import SharedSpace, ref_key

    (tmp_path / "shared").mkdir()
    space = SharedSpace(torch.device("cpu"), tmp_path / "shared")
    given = space.copy_of(torch.randn(256, 1024))
    slot = space.empty((256, 1024), torch.float32)
    refs = [space.ref(t).model_dump(mode="json") for t in (given, slot)]
    reply = process.ask({"type": "calibrate", "inputs": [{"ref": refs[0]}], "out": refs[1], "record": False,
                         "poison": False, "guard": False}, deadline_s=60)
    assert reply.error is None and reply.copied
    path = given._kernelgate_path
    assert _mapped(process.pid, path)  # opened, and kept open for the next call
    process.ask({"type": "ping", "release": [ref_key(refs[0])]}, deadline_s=30)
    assert not _mapped(process.pid, path)
    space.forget(given)
    assert not os.path.exists(path)
    assert _mapped(process.pid, slot._kernelgate_path)  # what was not released stays


STREAM_CANDIDATE = '''
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        if float(x[0, 0]) == 12345.0:
            raise ValueError("a bad row")
        return x * 2
'''


def test_a_stream_runs_every_call_into_the_judges_slots(process, tmp_path):
    """The judge-clocked stream's candidate side: ``stream_open`` maps one input list and one output
    slot per call, ``stream`` runs the calls back to back and copies each output into its slot (the
    judge reads the slots itself), ``stream_close`` drops them; a call that raises makes the
    stream's reply an error."""
    import torch

    from kernelgate.worker.protocol import SharedSpace

    (tmp_path / "shared").mkdir()
    space = SharedSpace(torch.device("cpu"), tmp_path / "shared")
    loaded = process.ask({"type": "load", "source": STREAM_CANDIDATE, "entry": "ModelNew", "dsl": "triton",
                          "dtype": "float32", "init": [], "state": {}, "compile_cache": False, "compile_cache_dir": "",
                          "limits": {"max_file_mb": 64, "gpu_memory_fraction": 0.85, "host_memory_mb": 8192}},
                         deadline_s=120)
    assert loaded.error is None and loaded.violation is None, loaded
    inputs = [space.copy_of(torch.randn(8, 16)) for _ in range(3)]
    slots = [space.empty((8, 16), torch.float32).fill_(float("nan")) for _ in range(3)]
    request = {"type": "stream_open", "calls": [[{"ref": space.ref(x).model_dump(mode="json")}] for x in inputs],
               "outs": [space.ref(slot).model_dump(mode="json") for slot in slots]}
    assert process.ask(request, deadline_s=60).error is None
    assert process.ask({"type": "stream"}, deadline_s=60).error is None
    for x, slot in zip(inputs, slots):
        assert torch.equal(slot, x * 2)
    inputs[1][0, 0] = 12345.0
    failed = process.ask({"type": "stream"}, deadline_s=60)
    assert failed.error is not None and "a bad row" in failed.error.message, failed
    assert process.ask({"type": "stream_close"}, deadline_s=60).error is None


def test_a_kept_output_is_let_go_once_it_is_read_again_or_forgotten(process, tmp_path):
    """The memory budget on the candidate's side: the history probe's outputs are kept for one
    recopy each; after it (or when a recopy names them in ``forget``) the candidate's process holds
    them no longer, and a ``ping`` with ``free_cache`` is answered (its empty_cache is CUDA-only)."""
    import torch

    from kernelgate.worker.protocol import SharedSpace

    (tmp_path / "shared").mkdir()
    space = SharedSpace(torch.device("cpu"), tmp_path / "shared")
    loaded = process.ask({"type": "load", "source": STREAM_CANDIDATE, "entry": "ModelNew", "dsl": "triton",
                          "dtype": "float32", "init": [], "state": {}, "compile_cache": False, "compile_cache_dir": "",
                          "limits": {"max_file_mb": 64, "gpu_memory_fraction": 0.85, "host_memory_mb": 8192}},
                         deadline_s=120)
    assert loaded.error is None and loaded.violation is None, loaded
    x = space.copy_of(torch.randn(8, 16))
    arg = [{"ref": space.ref(x).model_dump(mode="json")}]

    def slot():
        out = space.empty((8, 16), torch.float32).fill_(float("nan"))
        return out, space.ref(out).model_dump(mode="json")

    for number in (1, 2):
        out, ref = slot()
        reply = process.ask({"type": "call", "inputs": arg, "out": ref, "slot": number, "record": False,
                             "poison": False, "guard": False}, deadline_s=60)
        assert reply.error is None and torch.equal(out, x * 2), reply
    out, ref = slot()
    reply = process.ask({"type": "recopy", "slot": 1, "out": ref, "forget": [2]}, deadline_s=60)
    assert reply.error is None and torch.equal(out, x * 2), reply
    for number in (1, 2):
        again = process.ask({"type": "recopy", "slot": number, "out": slot()[1]}, deadline_s=60)
        assert again.error is not None and "no output kept" in again.error.message, again
    assert process.ask({"type": "ping", "free_cache": True}, deadline_s=30).error is None


def test_a_slow_reply_runs_the_on_slow_action_once_and_is_still_awaited(process, monkeypatch):
    """The gated stream's fallback: an enqueue that blocks gets the judge's word after a while."""
    process.thaw()
    os.kill(process.pid, 19)  # SIGSTOP behind the link's back: it cannot answer until the action runs
    monkeypatch.setattr(process, "thaw", lambda: None)
    ran: list[float] = []

    def action() -> None:
        ran.append(time.monotonic())
        os.kill(process.pid, 18)  # SIGCONT: as the word releases a blocked enqueue

    began = time.monotonic()
    reply = process.ask({"type": "ping"}, deadline_s=30, on_slow=(0.3, action))
    assert reply.type == "call"
    assert len(ran) == 1 and ran[0] - began >= 0.3


def test_a_prompt_reply_never_runs_the_on_slow_action(process):
    ran: list[int] = []
    reply = process.ask({"type": "ping"}, deadline_s=30, on_slow=(20.0, lambda: ran.append(1)))
    assert reply.type == "call" and ran == []
