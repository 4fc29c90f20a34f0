"""The judge's handle on the candidate's process: start it, ask it, stop it, kill it.

The candidate's process runs in a session of its own, so the judge can stop it (SIGSTOP) between
requests: no thread of the candidate's can launch GPU work while the judge draws inputs, times
the library or reads outputs. Every request has a deadline measured by the judge; time during
which the candidate's process says a DSL compiler runs (a shared word it sets from
``kernelgate.integrity.compiler_section``) extends it, up to the compile allowance. Past the
deadline, or past the host-memory limit, the process is killed and the request ends with a
reason; its death (a segfault, ``os._exit``) is a reason too. Replies are JSON lines, validated.
"""

from __future__ import annotations

import json
import mmap
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from kernelgate.worker import stacks
from kernelgate.worker.protocol import ArtifactsReply, CallReply, LoadReply

__all__ = ["CandidateProcess", "Unanswered"]

_REPLIES = {"call": CallReply, "load": LoadReply, "artifacts": ArtifactsReply}


class Unanswered(Exception):
    """No reply: ``why`` is ``timeout``, ``died`` or ``memory``; ``message`` says what happened;
    ``at``, after a timeout, where the candidate's process was (``stacks.where``)."""

    def __init__(self, why: str, message: str, at: str = "") -> None:
        super().__init__(message)
        self.why, self.message, self.at = why, message, at


class CandidateProcess:
    """One candidate process, started ahead (imports done) and used for one job."""

    def __init__(self, judge_dir: Path, env: dict[str, str]) -> None:
        self.workdir = judge_dir / "candidate"
        self.workdir.mkdir(exist_ok=True)
        flag_path = judge_dir / "compile.flag"
        flag_path.write_bytes(b"\0" * 8)
        with open(flag_path, "r+b") as handle:
            self._flag = mmap.mmap(handle.fileno(), 8)
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        env = {**env, "HOME": str(self.workdir), "TMPDIR": str(self.workdir)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelgate.worker.candidate", str(req_r), str(rep_w), str(self.workdir),
             str(flag_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(req_r, rep_w), start_new_session=True, cwd=self.workdir, env=env,
            preexec_fn=_die_with_parent)
        os.close(req_r)
        os.close(rep_w)
        self._buffer = b""
        self._stopped = False
        self._in_request = False
        self.host_memory_mb: float | None = None
        self.peak_rss_mb = 0.0

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, timeout: float) -> None:
        """Let it create its CUDA context, and wait until it says ready."""
        self._write({"type": "go"})
        record = self._read(time.monotonic() + timeout, watch=False)
        if record is None or record.get("type") != "ready":
            raise Unanswered("died", f"the candidate's process failed to start ({self.exit_text()}): "
                                     f"{self.log_tail()[-400:]}")

    def freeze(self) -> None:
        """Stop the candidate's process group, and return once its process has stopped (a signal is
        delivered asynchronously: without the wait it could still run for a moment)."""
        if not self._stopped and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGSTOP)
                self._stopped = True
                os.waitid(os.P_PID, self.proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
            except (ProcessLookupError, PermissionError, ChildProcessError):
                pass

    def refreeze_on_resume(self) -> None:
        """A supervisor that stopped and resumed this worker woke the candidate's process too: stop it
        again unless a request is running (the handler runs in the judge's main thread)."""

        def handler(signum, frame) -> None:
            if not self._in_request and self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGSTOP)
                    self._stopped = True
                except (ProcessLookupError, PermissionError):
                    pass

        signal.signal(signal.SIGCONT, handler)

    def thaw(self) -> None:
        if self._stopped:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            self._stopped = False

    def kill(self, wait: bool = True) -> None:
        """SIGKILL its process group; ``wait`` until its process is gone (with its CUDA context, so
        nothing of it can still run on the GPU), or leave that to the judge's own exit."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if wait:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req_w = self._rep_r = -1

    def cpu_seconds(self) -> float:
        """CPU time the candidate's process group has used so far (user + system, its threads and its
        reaped children included), from ``/proc``: the kernel's count, which nothing in the group can
        lower. Processes that left the group (``setsid``) are not counted."""
        return group_cpu_seconds(self.proc.pid)

    def exit_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "running"
        if code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def log_tail(self, chars: int = 1500) -> str:
        try:
            data = (self.workdir / "candidate.log").read_bytes()
        except OSError:
            return ""
        return data[-chars:].decode("utf-8", "replace")

    # --- requests ----------------------------------------------------------------------------

    def ask(self, request: dict, *, deadline_s: float, compile_s: float = 0.0,
            on_slow: tuple[float, Callable[[], None]] | None = None):
        """Send one request and return its validated reply; raises ``Unanswered``.

        The process runs only for the request: it is woken before and stopped after.
        ``deadline_s`` runs from the send; time the process spends inside a DSL compiler extends
        it by as much, up to ``compile_s`` in all. ``on_slow`` = (seconds, action): without a reply
        by then, the action runs once (the gated stream's word, stored for an enqueue that blocks)
        and the wait goes on to the deadline.
        """
        kind = request["type"] if request["type"] in ("load", "artifacts") else "call"
        self._in_request = True
        self.thaw()
        try:
            self._write(request)
            began = time.monotonic()
            record = None
            if on_slow is not None and on_slow[0] < deadline_s:
                record = self._read(began + on_slow[0], watch=True)
                if record is None and not self._eof and not self._over_memory and self.proc.poll() is None:
                    on_slow[1]()
                    record = self._read(began + deadline_s, watch=True, compile_s=compile_s)
            else:
                record = self._read(began + deadline_s, watch=True, compile_s=compile_s)
            at = ""
            if record is None and not self._eof and not self._over_memory and self.proc.poll() is None:
                at = stacks.where(self.proc.pid, self.workdir / stacks.CANDIDATE_DUMP)  # before it is stopped
        finally:
            self.freeze()
            self._in_request = False
        if record is None:
            raise self._why_unanswered(deadline_s, eof=self._eof, at=at)
        try:
            return _REPLIES[kind].model_validate(record)
        except ValidationError as exc:
            raise Unanswered("died", f"the candidate's process sent an invalid {kind} reply: {str(exc)[:300]}") from None

    def _why_unanswered(self, deadline_s: float, eof: bool = False, at: str = "") -> Unanswered:
        if self._over_memory:
            return Unanswered("memory", f"the candidate's process reached {self.peak_rss_mb:.0f} MiB resident, over its "
                                        f"limit of {self.host_memory_mb:.0f} MiB; it was killed")
        if eof:  # its end of the pipe closed as it died: wait for its exit status
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.kill()
            return Unanswered("timeout", f"no reply within {deadline_s:.3g} s; the candidate's process was killed "
                                         f"(it was at: {at})", at=at)
        tail = self.log_tail()
        return Unanswered("died", f"the candidate's process died with {self.exit_text()}" + _hint(self.exit_text(), tail)
                          + (":\n" + "\n".join(tail.strip().splitlines()[-6:]) if tail.strip() else ""))

    def _write(self, record: dict) -> None:
        data = (json.dumps(record) + "\n").encode()
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._req_w, view)
                view = view[written:]
        except (BrokenPipeError, OSError):
            pass  # it is gone; the read sees EOF

    _over_memory = False
    _eof = False

    def _read(self, deadline: float, *, watch: bool, compile_s: float = 0.0) -> dict | None:
        """The next JSON record, or None at EOF, past the deadline or past the memory limit."""
        sel = selectors.DefaultSelector()
        sel.register(self._rep_r, selectors.EVENT_READ)
        compiling_from: float | None = None
        credit = 0.0
        try:
            while True:
                if b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        return record
                    continue
                now = time.monotonic()
                if int.from_bytes(self._flag[0:8], "little") > 0:  # a compiler runs: its time is not the run's
                    compiling_from = compiling_from if compiling_from is not None else now
                elif compiling_from is not None:
                    credit += now - compiling_from
                    compiling_from = None
                extra = min(compile_s, credit + (now - compiling_from if compiling_from is not None else 0.0))
                remaining = deadline + extra - now
                if remaining <= 0:
                    return None
                if not sel.select(timeout=min(remaining, 0.1)):
                    if watch and self._memory_exceeded():
                        return None
                    continue
                chunk = os.read(self._rep_r, 1 << 20)
                if not chunk:
                    self._eof = True
                    return None
                self._buffer += chunk
        finally:
            sel.close()

    def _memory_exceeded(self) -> bool:
        if self.host_memory_mb is None:
            return False
        from kernelgate.worker.supervisor import resident_mb

        rss = resident_mb(self.proc.pid)
        if rss is None:
            return False
        self.peak_rss_mb = max(self.peak_rss_mb, rss)
        if rss <= self.host_memory_mb:
            return False
        self._over_memory = True
        self.kill()
        return True


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def group_cpu_seconds(pgid: int) -> float:
    """CPU time of every process in process group ``pgid``, in seconds: per process the larger of
    its live threads' time from ``/proc/PID/task/TID/schedstat`` (nanoseconds: a short stream of
    calls is measurable) and its ``utime + stime`` from ``/proc/PID/stat`` (10 ms ticks, but
    exited threads included), plus its reaped children's (``cutime + cstime``)."""
    total = 0.0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2:].split()  # fields from the state on: the name may hold spaces
        if len(fields) <= 14 or int(fields[2]) != pgid:  # pgrp; utime, stime, cutime, cstime follow
            continue
        total += (int(fields[13]) + int(fields[14])) / _TICKS
        ticks = (int(fields[11]) + int(fields[12])) / _TICKS  # exited threads included, coarse
        total += max(ticks, _threads_cpu_seconds(name) or 0.0)  # live threads, to the nanosecond
    return total


def _threads_cpu_seconds(pid: str) -> float | None:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    ns = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as handle:
                ns += int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            if tid == pid:
                return None
    return ns / 1e9


def _die_with_parent() -> None:
    """In the child before exec: the kernel SIGKILLs it when the judge dies. A candidate's process
    stopped between requests cannot notice its parent's death itself, and a judge killed with
    SIGKILL (a spare the supervisor closes) cannot kill it first."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _hint(exit_text: str, tail: str) -> str:
    lowered = tail.lower()
    if "SIGXFSZ" in exit_text:
        return " (it wrote a file past the size limit: a flood of output)"
    if "illegal memory access" in lowered or "illegal address" in lowered:
        return " (an illegal memory access)"
    if "out of memory" in lowered or "memoryerror" in lowered:
        return " (out of memory)"
    if "segmentation fault" in lowered or "SIGSEGV" in exit_text:
        return " (a segmentation fault)"
    return ""
