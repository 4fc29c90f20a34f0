"""The parent's side of a screen: start a worker (a judge process and its candidate's process),
hand it one job, supervise it, and receive data only. The parent never imports torch.

Rules every worker follows:

- a worker is two processes: the judge (``kernelgate.worker.judge``), which holds the problem,
  the reference, the expected outputs, every threshold and statistic, and never imports
  candidate code; and the candidate's process (``kernelgate.worker.candidate``), which loads and
  runs the candidate only, and is used for one candidate, then killed;
- spare workers are started ahead, with torch imported and both CUDA contexts up, so isolation
  costs little latency (``WorkerPool``);
- the judge writes JSON records on a private pipe, not on stdout, and every record is validated
  by the parent;
- the child waits for a go-ahead before its numerics and before its timing (``GATED_PHASES``):
  spares finish starting before a job times, and a ``TurnPool`` hands out turns on the GPU there;
- each phase has its own deadline (load and compile, run, artifacts, timing); past it the whole
  process group is killed;
- a dead child (segfault, illegal address, ``os._exit``, out of memory) becomes a ``Failure``, with
  the last partial measurement kept;
- limits per worker: a clean environment (``child_environment``: ``HOME`` and ``TMPDIR`` are its
  temp dir, which is also its cwd), a host-memory watchdog on the resident size (all machines; on
  a GPU machine it is the only host limit, because address-space limits break the CUDA driver's
  reservations), ``RLIMIT_DATA`` as well where no GPU is visible, ``RLIMIT_FSIZE`` against floods
  of output, and a cap on the GPU's caching allocator (set in the child).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import secrets
import threading
import time
from pathlib import Path
from typing import Callable, Literal

from pydantic import Field, ValidationError

from kernelgate import compile_cache
from kernelgate._base import Model
from kernelgate.errors import ProblemError, WorkerError
from kernelgate.models import Candidate, Failure, Measurement, Problem, Reason
from kernelgate.turns import GpuTurns
from kernelgate.worker import stacks
from kernelgate.worker.protocol import OOM_TEXTS, START_GATE

__all__ = ["ScreenOptions", "Job", "WorkerResult", "Worker", "WorkerPool", "TurnPool", "default_pool",
           "child_environment", "default_host_memory_mb"]

log = logging.getLogger(__name__)

LOG_TAIL_CHARS = 1500


class ScreenOptions(Model):
    """How much to measure and how long to wait: execution settings, not decision thresholds."""

    load_timeout_s: float = Field(default=180.0, gt=0)
    """Importing the candidate and compiling (also the ahead-of-time compile of artifacts)."""
    run_timeout_s: float = Field(default=300.0, gt=0)
    """Numerics trials; and separately the timing phase."""
    numerics_trials: int = Field(default=5, ge=1, le=5)
    """Trials with fresh inputs, one distribution each."""
    timing_reps: int = Field(default=30, ge=5)
    timing_max_seconds: float = Field(default=20.0, gt=0)
    timing_adaptive: bool = False
    """Stop timing once both medians are known well enough (``kernelgate.timing.enough_samples``):
    after at least ``timing_min_reps`` repetitions, when a distribution-free 95% interval of each
    median lies within ``timing_rel_halfwidth`` of it. A steady kernel then takes 10 repetitions, a
    noisy one up to ``timing_reps``; the verdict's ``timing.stopped`` says which. Off by default
    (a single screen keeps its 30 repetitions). With it on, every kernel's LRE stayed within 3% over
    three runs of the throughput benchmark on the H200 (``benchmarks/results/throughput_h200.json``)."""
    timing_min_reps: int = Field(default=10, ge=6)
    """Fewest repetitions before adaptive timing may stop (6 is the least for which a 95% interval
    of a median exists; at 10 it runs from the 2nd to the 9th sample)."""
    timing_rel_halfwidth: float = Field(default=0.01, gt=0, lt=1)
    """Adaptive timing stops when each median's 95% interval is within +-this fraction of it."""
    timing_input_sets: int = Field(default=3, ge=1)
    timing_launch_window_ms: float = Field(default=0.2, ge=0, le=5)
    """The least GPU idle time after each L2 flush, before the start event, during which the host
    enqueues the timed call (``kernelgate.timing._time_once``); it widens to twice the slowest
    host enqueue of the warm-up calls, up to 5 ms (``timing.launch_window``). At 0 there is no
    window at all: only the flush (about 60 us on an H200) hides the host's launch work, and a
    wrapper slower than that is charged the difference. In a screen the wrapper's Python with the
    integrity hooks took 0.04 to 0.15 ms on the H200, more with other workers busy, and short
    kernels moved by up to 2x between runs (``benchmarks/results/timing_contention_h200.json``).
    A call that still takes longer is counted in ``TimeStats.host_late_reps`` and noted in the
    verdict."""
    interpreter_max_elements: int = Field(default=1 << 22, ge=1)
    """Without a GPU, problems with more input elements are checked statically only."""
    compile_cache: bool = True
    """Reuse compiled code across screens (``kernelgate.compile_cache``); False: compile privately."""
    compile_cache_dir: str = Field(default_factory=lambda: str(compile_cache.default_root()))
    """Where compiled code is kept; resolved in the caller's process, not the candidate's environment."""
    ncu: bool = False
    """After a timed screen, profile one call of the candidate with Nsight Compute where ``ncu`` is
    installed (``kernelgate.ncu``): DRAM bytes actually moved, per kernel. Adds a process and a
    kernel replay per launch, seconds to minutes; without ncu or a GPU the verdict notes the skip."""
    physics_limit: float = Field(default=1.1, gt=1)
    """Retime when U at the fastest math mode exceeds this (``screen`` lowers it to ``Policy.u_impossible``)."""
    startup_timeout_s: float = Field(default=120.0, gt=0)
    host_memory_mb: int | None = Field(default=None, ge=256)
    """Host memory one worker may use; None: half the machine's memory, at most 32 GiB. Enforced by a
    watchdog on the worker's resident size (all machines) and, without a GPU, by ``RLIMIT_DATA``."""
    gpu_memory_fraction: float = Field(default=0.85, gt=0, le=1)
    """Share of the GPU's memory the worker's caching allocator may hold (``set_per_process_memory_fraction``)."""
    max_file_mb: int = Field(default=512, ge=1)
    """Largest file the worker may write (``RLIMIT_FSIZE``): its log included, so a flood of output stops."""
    settle_delay_s: float = Field(default=0.05, ge=0)
    """How long after a call the output is watched for late writes (background work)."""
    recheck_calls: int = Field(default=6, ge=0)
    """Without a GPU (no timing loop): further calls before the last outputs are rechecked."""
    stream_check: bool = False
    """On a GPU, after timing, run the judge-clocked stream (``Screen._stream``): calls back to back
    under the judge's clock, which ``Policy.stream_factor`` compares with the candidate's claim.
    The stream is gated (``kernelgate/worker/gpu_gate.py``): every call is enqueued behind a wait
    for the judge's word, so the candidate's host work is outside the clock. Off by default until
    the gated stream has been run on a GPU against the corpus and the red team: its ungated form
    rejected 11 honest corpus kernels whose streams were bound by the host work of the candidate's
    process (``benchmarks/results/gate_corpus_h100_stream.json``)."""
    keep_alive_bytes: int = Field(default=256 << 20, ge=0)
    """Problems whose one call's data (inputs, output, parameters) is at most this keep every trial's
    buffers allocated, so each call gets addresses no earlier one had; larger ones free them as soon
    as a stage is done with them and check their probes against the library in its own dtype (the
    memory budget)."""


class Job(Model):
    candidate: Candidate
    problem: Problem
    options: ScreenOptions = Field(default_factory=ScreenOptions)


class WorkerResult(Model):
    """What the parent knows after a job: the measurement, how the child ended, where time went."""

    measurement: Measurement
    exit: str
    """``ok`` (the result came in; the worker was then ended), ``exit code N``, ``signal NAME`` or
    ``killed after timeout``."""
    log_tail: str = ""
    """The end of the candidate's own stdout/stderr."""
    seconds: dict[str, float] = Field(default_factory=dict)


BACKSTOP_S = 10.0
"""The supervisor's phase deadlines run this long past the options' own. The judge enforces the
candidate's deadlines itself (and says where the candidate was); the supervisor's catch a judge
that hangs, and a candidate whose request the judge waits on past its own deadline plus this."""

GATED_PHASES = ("run", "timing")
"""Phases the child starts only on the parent's go-ahead (the GPU-heavy ones: numerics, timing).
The child says ``run`` again between the numerics' parts (trials, probes, the kernel profile) and
waits for another go-ahead there, so a pool can let a waiting timing in between them."""


class _Record(Model):
    type: Literal["started", "ready", "phase", "result", "problem_error", "judge_error"]
    candidate_pid: int | None = None
    token: str = ""
    phase: str | None = None
    measurement: Measurement | None = None
    message: str | None = None


_PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CC", "CXX",
               "KERNELGATE_CACHE_DIR", START_GATE)
_PASSED_PREFIXES = ("CUDA_", "TRITON_", "NVIDIA_", "TILELANG_", "TVM_", "NCCL_", "OMP_", "MKL_")
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL", "SEED")


def child_environment(base: dict[str, str], workdir: Path) -> dict[str, str]:
    """The worker's environment: only what torch, the DSLs and their compilers need.

    ``HOME`` and ``TMPDIR`` are the worker's own temp dir; nothing that looks like a credential
    or a seed passes, even under a passed prefix; ``TRITON_INTERPRET`` is the worker's to set.
    """
    env = {k: v for k, v in base.items()
           if (k in _PASSED_ENV or k.startswith(_PASSED_PREFIXES)) and not any(w in k.upper() for w in _SECRET_WORDS)}
    env.pop("TRITON_INTERPRET", None)
    env.setdefault("PATH", os.defpath)
    env.update(HOME=str(workdir), TMPDIR=str(workdir), PYTHONNOUSERSITE="1")
    if "KERNELGATE_CACHE_DIR" not in env:  # the calibration cache is found where the parent finds it
        env["KERNELGATE_CACHE_DIR"] = str(Path.home() / ".cache" / "kernelgate")
    return env


def default_host_memory_mb() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError):
        total = 16384
    return int(min(32768, max(1024, total // 2)))


def resident_mb(pid: int) -> float | None:
    """Resident set size of a process in MiB (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-LOG_TAIL_CHARS:].decode("utf-8", "replace")


class Worker:
    """One child process, used for exactly one job."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="kernelgate-"))
        read_fd, write_fd = os.pipe()
        self._started = time.perf_counter()
        child_env = child_environment(dict(os.environ if env is None else env), self.workdir)
        # Every record the judge sends carries this token, handed over on its stdin before its
        # candidate's process exists: a record written into the pipe by anyone else (the candidate's
        # process reopening it through /proc) is dropped.
        self._token = secrets.token_hex(16)
        self._memory_limit_mb: float | None = None
        self._peak_rss_mb = 0.0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelgate.worker.judge", str(write_fd), str(self.workdir)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(write_fd,), start_new_session=True, cwd=self.workdir, env=child_env,
        )
        os.close(write_fd)
        try:
            self.proc.stdin.write(self._token.encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died at once: wait_ready says so
        self._reader = os.fdopen(read_fd, "rb", buffering=0)
        self._buffer = b""
        self._ready = False
        self.candidate_pid: int | None = None
        self.forged_records = 0
        """Records without the judge's token: someone else wrote into the judge's pipe."""
        """The candidate's process (its own session), started by the judge; stopped and killed with it."""
        self.paused_seconds = 0.0
        """Time spent stopped by its pool (``pause``): added to the deadlines of its phases."""
        self._paused_at: float | None = None

    # --- channel -----------------------------------------------------------------------------

    def _next_record(self, deadline: float) -> _Record | None:
        """The next valid record, or None on EOF or deadline (moved on by any time spent paused).
        Invalid lines are skipped."""
        paused_before = self._paused_total()
        sel = selectors.DefaultSelector()
        sel.register(self._reader, selectors.EVENT_READ)
        try:
            while True:
                if b"\n" in self._buffer:
                    line, self._buffer = self._buffer.split(b"\n", 1)
                    try:
                        record = _Record.model_validate_json(line)
                    except (ValidationError, ValueError):
                        log.warning("worker sent an invalid record (%d bytes); ignored", len(line))
                        continue
                    if not secrets.compare_digest(record.token, self._token):
                        log.warning("a record without the judge's token reached the supervisor; ignored")
                        self.forged_records += 1
                        continue
                    return record
                remaining = deadline + (self._paused_total() - paused_before) - time.monotonic()
                if remaining <= 0:
                    return None
                if not sel.select(timeout=min(remaining, 0.25)):
                    if self._over_memory():
                        return None
                    continue
                chunk = self._reader.read(1 << 20)
                if not chunk:
                    return None
                self._buffer += chunk
        finally:
            sel.close()

    def _over_memory(self) -> bool:
        """The watchdog: True (and the group killed) when the worker's resident size passes its limit."""
        if self._memory_limit_mb is None:
            return False
        rss = resident_mb(self.proc.pid)
        if rss is None:
            return False
        self._peak_rss_mb = max(self._peak_rss_mb, rss)
        if rss <= self._memory_limit_mb:
            return False
        self.kill()
        return True

    def wait_ready(self, timeout: float, before_gpu: Callable[[], None] | None = None) -> None:
        """Wait for the child's ``ready``. A child started with ``START_GATE`` first says ``started``
        (imports done, no CUDA context yet): ``before_gpu()`` runs then (a pool takes its turn),
        and the child is told to go on; the time it takes does not count against ``timeout``."""
        if self._ready:
            return
        deadline = time.monotonic() + timeout
        record = self._next_record(deadline)
        if record is not None and record.type == "started":
            waited = time.monotonic()
            if before_gpu is not None:
                before_gpu()
            deadline += time.monotonic() - waited
            self._send_go()
            record = self._next_record(deadline)
        if record is None or record.type != "ready":
            try:
                self.proc.wait(timeout=1)  # at EOF it is exiting: its own exit code, not the kill's
            except subprocess.TimeoutExpired:
                pass
            why = record.message if record is not None and record.message else self._exit_text()
            self.kill()
            log = self.log_tail()[-500:] or self._judge_log_tail()[-500:]  # the judge's own, where it died first
            raise WorkerError(f"worker failed to start: {why}; log: {log}")
        self.candidate_pid = record.candidate_pid
        self._ready = True

    def _send_go(self) -> None:
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child is gone; the next read sees EOF

    # --- lifecycle ---------------------------------------------------------------------------

    def _groups(self) -> list[int]:
        """The judge's process group, and the candidate's (a session of its own; before ``ready``
        its pid is read from the judge's children, so a starting spare can be stopped whole)."""
        candidate = [self.candidate_pid] if self.candidate_pid else _children(self.proc.pid)
        return [self.proc.pid] + candidate

    def pause(self) -> None:
        """Stop both processes' groups (their compilers too) until ``resume``."""
        if self._paused_at is None and self.proc.poll() is None:
            for group in self._groups():
                try:
                    os.killpg(group, signal.SIGSTOP)
                except (ProcessLookupError, PermissionError):
                    pass
            self._paused_at = time.monotonic()

    def _paused_total(self) -> float:
        ongoing = time.monotonic() - self._paused_at if self._paused_at is not None else 0.0
        return self.paused_seconds + ongoing

    def resume(self) -> None:
        """The candidate's group first, then the judge's: the judge stops its candidate again if it
        was not asked to run (its SIGCONT handler)."""
        if self._paused_at is not None:
            for group in reversed(self._groups()):
                try:
                    os.killpg(group, signal.SIGCONT)
                except (ProcessLookupError, PermissionError):
                    pass
            self.paused_seconds += time.monotonic() - self._paused_at
            self._paused_at = None

    def kill(self, wait: bool = True) -> None:
        """SIGKILL both processes' groups. ``wait=False`` leaves the judge's exit (its CUDA context's
        teardown, a fraction of a second) to a thread that reaps it, off the caller's path."""
        self.resume()
        for group in self._groups():
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not wait:
            threading.Thread(target=self.proc.wait, name="kernelgate-reap", daemon=True).start()
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self, wait: bool = True) -> None:
        self.kill(wait=wait)
        try:
            if self.proc.stdin and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self._reader.close()
        finally:
            if not os.environ.get("KERNELGATE_KEEP_WORKDIRS"):  # debugging: the judge's and candidate's logs stay
                shutil.rmtree(self.workdir, ignore_errors=True)

    def _exit_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "running"
        if code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def _where(self) -> str:
        """Where the judge and the candidate's process were when the deadline passed (their stacks,
        ``kernelgate.worker.stacks``): which of them hung, and in what."""
        judge = stacks.where(self.proc.pid, self.workdir / stacks.JUDGE_DUMP)
        candidate = (stacks.where(self.candidate_pid, self.workdir / "candidate" / stacks.CANDIDATE_DUMP)
                     if self.candidate_pid else "not started")
        return f" (the judge was at: {judge}; the candidate's process: {candidate})"

    def log_tail(self) -> str:
        return _tail(self.workdir / "candidate" / "candidate.log")

    def _judge_log_tail(self) -> str:
        return _tail(self.workdir / "judge.log")

    # --- one job -----------------------------------------------------------------------------

    def run(self, job: Job, on_phase: Callable[[str], None] | None = None) -> WorkerResult:
        """Send the job, supervise its phases, always return a result (never the child's exception).

        ``on_phase(name)`` runs as each phase begins (load, run, artifacts, timing); for the gated
        phases the child waits until it returns (a pool lets starting spares finish before a
        timing, or waits for a turn on the GPU). Each phase's deadline starts after it returns.
        """
        opts = job.options
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        try:
            self.wait_ready(opts.startup_timeout_s)
            seconds["worker_wait"] = round(time.perf_counter() - t0, 4)
            self.proc.stdin.write(job.model_dump_json().encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, WorkerError) as exc:
            self.close()
            raise WorkerError(f"could not hand the job to a worker: {exc}") from exc
        self._memory_limit_mb = float(opts.host_memory_mb or default_host_memory_mb())
        self._peak_rss_mb = 0.0
        budgets = {"load": opts.load_timeout_s + BACKSTOP_S, "run": opts.run_timeout_s + BACKSTOP_S,
                   "artifacts": opts.load_timeout_s + BACKSTOP_S, "timing": opts.run_timeout_s + BACKSTOP_S}
        phase, deadline = "load", time.monotonic() + budgets["load"]
        partial = Measurement()
        outcome = None
        while True:
            record = self._next_record(deadline)
            if record is None:
                break
            if record.type == "phase" and record.phase in budgets:
                again, phase = record.phase == phase, record.phase
                if record.measurement is not None:
                    partial = record.measurement
                waited = time.monotonic()
                if on_phase is not None:
                    on_phase(phase)
                if phase in GATED_PHASES:
                    self._send_go()
                # a gated phase said again is a checkpoint inside it (between the numerics' parts):
                # its deadline runs on, less the wait for the go-ahead
                deadline = deadline + (time.monotonic() - waited) if again else time.monotonic() + budgets[phase]
            elif record.type == "result" and record.measurement is not None:
                outcome = record.measurement
                break
            elif record.type == "problem_error":
                self.close()
                raise ProblemError(record.message or "the problem could not be built")
            elif record.type == "judge_error":
                self.close()
                raise WorkerError(f"the judge failed (a fault of the gate, not of the candidate): {record.message}")
        over_memory = outcome is None and self._peak_rss_mb > (self._memory_limit_mb or float("inf"))
        timed_out = outcome is None and not over_memory and time.monotonic() >= deadline
        where = self._where() if timed_out else ""
        if outcome is None:
            self.kill()
        else:  # the result is in: both processes end now, and nothing they still do can matter
            self.kill(wait=False)
        exit_text = ("killed after timeout" if timed_out else
                     f"killed at {self._peak_rss_mb:.0f} MiB resident" if over_memory else
                     "ok" if outcome is not None else self._exit_text())
        tail = self.log_tail()
        if outcome is None:
            outcome = partial
            if over_memory:
                outcome.failure = Failure(reason=Reason.out_of_memory, stage=phase, message=(
                    f"the worker's resident memory reached {self._peak_rss_mb:.0f} MiB, over its limit of "
                    f"{self._memory_limit_mb:.0f} MiB, in the {phase} phase; it was killed"))
            else:
                outcome.failure = _supervisor_failure(phase, timed_out, exit_text, tail, budgets[phase], where)
        if self.forged_records:  # only the candidate's process could have: a reject whatever else happened
            outcome.failure = Failure(reason=Reason.tampering, stage="supervisor", message=(
                f"{self.forged_records} record(s) without the judge's token were written into the judge's pipe to "
                "the supervisor: the candidate's process forged the judge's report"))
        seconds["job"] = round(time.perf_counter() - t0, 4)
        self.close(wait=False)
        return WorkerResult(measurement=outcome, exit=exit_text, log_tail=tail,
                            seconds=seconds)


def _supervisor_failure(phase: str, timed_out: bool, exit_text: str, tail: str, budget: float,
                        where: str = "") -> Failure:
    if timed_out:
        reason = Reason.load_timeout if phase in ("load", "artifacts") else Reason.run_timeout
        return Failure(reason=reason, stage=phase,
                       message=f"no result within {budget:g} s in the {phase} phase; the worker was killed{where}")
    lowered = tail.lower()
    hint = ""
    if "SIGXFSZ" in exit_text:
        hint = " (it wrote a file past the size limit: a flood of output)"
    elif "illegal memory access" in lowered or "illegal address" in lowered:
        hint = " (an illegal memory access)"
    elif "out of memory" in lowered or "memoryerror" in lowered:
        hint = " (out of memory)"
    elif "segmentation fault" in lowered or "SIGSEGV" in exit_text:
        hint = " (a segmentation fault)"
    last = "\n".join(tail.strip().splitlines()[-6:])
    reason = Reason.out_of_memory if hint == " (out of memory)" else Reason.crash
    return Failure(reason=reason, stage=phase,
                   message=f"the worker died in the {phase} phase with {exit_text}{hint}" + (f":\n{last}" if last else ""))


def _children(pid: int) -> list[int]:
    """The pids of a process's children (``/proc/PID/task/PID/children``); empty where unreadable."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(x) for x in handle.read().split()]
    except (OSError, ValueError):
        return []


class WorkerPool:
    """Spare workers started ahead; each ``run`` uses a fresh one and starts its replacement."""

    def __init__(self, spares: int = 1, env: dict[str, str] | None = None) -> None:
        self.spares = spares
        self.env = env
        """The environment the workers start from (None: this process's); ``child_environment`` trims it."""
        self._idle: list[Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._fill()

    def _fill(self) -> None:
        with self._lock:
            while not self._closed and len(self._idle) < self.spares:
                self._idle.append(Worker(env=self.env))

    def acquire(self) -> Worker:
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        worker = worker or Worker(env=self.env)
        self._fill()
        return worker

    def _ready(self, timeout: float) -> Worker:
        """A spare, ready; one that died while it waited (say, its CUDA context refused while the last
        job's processes held the device) is replaced by a new worker once: not the job's fault."""
        worker = self.acquire()
        try:
            worker.wait_ready(timeout)
        except WorkerError:
            worker.close()
            worker = Worker(env=self.env)  # its own failure to start, if any, is the job's result
        return worker

    def run(self, job: Job) -> WorkerResult:
        paused: list[Worker] = []

        def on_phase(phase: str) -> None:
            if phase == "timing":  # quiet host and GPU: spares still starting are stopped, not awaited
                with self._lock:
                    paused.extend(self._idle)
                for worker in paused:
                    worker.pause()

        try:
            return self._ready(job.options.startup_timeout_s).run(job, on_phase=on_phase)
        finally:
            for worker in paused:
                worker.resume()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


class TurnPool:
    """Several jobs at once on one GPU, each timed alone (``kernelgate.turns``).

    Each job gets a fresh worker, started ahead (``spares`` of them, by default one per job in
    flight): its imports (CPU work, seconds) are done before the job comes, and it waits at the
    start gate without a CUDA context until the job takes it. Its imports take no turn; its CUDA context and its numerics
    (the candidate's first kernels, Triton's JIT compile) take shared turns, which overlap other
    jobs' shared turns. Between the numerics' parts (trials, probes, the kernel profile) a job
    gives its shared turn up if a timing is waiting, so a timing waits for one part, not for whole
    numerics. Loading (TileLang and CUDA builds) and the artifacts (ahead-of-time compiles) are CPU
    work and take no turn. Its timing takes the exclusive turn: no shared turn
    is running then, and every other worker of the pool is stopped (SIGSTOP, compilers included)
    until the timing ends, so the timing sees a machine as quiet as a one-at-a-time lane, while a
    long CUDA build elsewhere only waits. Deadlines do not count time spent stopped.

    A job that runs out of memory beside others (the candidate's process, or the judge itself) is
    run again alone: once no other job of the pool is in flight, with none starting until it ends,
    and with the exclusive turn from start to end, so a large problem is not rejected for its
    neighbours' memory.
    Call ``run`` from up to ``concurrency`` threads; each worker process is limited to its share of
    the CPU threads (``OMP_NUM_THREADS``, ``TVM_NUM_THREADS``) unless the environment sets them.
    The result's seconds gain ``worker_start``, ``turn_wait`` (for shared turns), ``timing_wait``
    (for the exclusive one) and ``run_alone`` (1 for a job run again alone).
    """

    def __init__(self, concurrency: int, env: dict[str, str] | None = None, turns: GpuTurns | None = None,
                 worker_factory: Callable[..., Worker] = Worker, spares: int | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.spares = concurrency if spares is None else spares
        threads = str(max(1, (os.cpu_count() or 2) // concurrency))
        self.env = {"OMP_NUM_THREADS": threads, "TVM_NUM_THREADS": threads, **(os.environ if env is None else env),
                    START_GATE: "1"}
        self.turns = turns or GpuTurns()
        self._new_worker = worker_factory
        self._live: set = set()
        self._lock = threading.Lock()
        self._jobs = threading.Condition()
        self._in_flight = 0
        self._solo = False
        """A job run again alone waits until no other job of the pool is in flight, and none starts
        until it ends: the others' processes hold GPU memory even while stopped."""
        self._idle: list = []
        """Workers started ahead, at the start gate (no CUDA context, so no GPU memory)."""
        self._closed = False
        self._fill()

    def _fill(self) -> None:
        with self._lock:
            while not self._closed and len(self._idle) < self.spares:
                self._idle.append(self._new_worker(env=self.env))

    def _ready_worker(self, timeout: float, before_gpu: Callable[[], None], claim: Callable[[object], None]):
        """A spare (or a new worker when none is left), ready: its CUDA context made in the caller's
        turn (``before_gpu``). ``claim(worker)`` runs as soon as a worker is the job's, before it is
        waited for. A spare that died while it waited is replaced by a new worker once."""
        with self._lock:
            worker = self._idle.pop(0) if self._idle else None
        retries = 1 if worker is not None else 0
        self._fill()
        while True:
            worker = worker or self._new_worker(env=self.env)
            with self._lock:
                self._live.add(worker)
            claim(worker)
            try:
                worker.wait_ready(timeout, before_gpu=before_gpu)
                return worker
            except WorkerError:
                worker.close()
                with self._lock:
                    self._live.discard(worker)
                if not retries:
                    raise
                retries, worker = retries - 1, None

    def run(self, job: Job) -> WorkerResult:
        try:
            result = self._attempt(job, alone=False)
        except WorkerError as exc:  # the judge itself ran out of GPU memory beside other jobs' processes
            if not any(text in str(exc).lower() for text in OOM_TEXTS):
                raise
            result = None
        failure = result.measurement.failure if result is not None else None
        if result is None or (failure is not None and failure.reason is Reason.out_of_memory):
            result = self._attempt(job, alone=True)
            result.seconds["run_alone"] = 1
        return result

    def _attempt(self, job: Job, alone: bool) -> WorkerResult:
        held: list[str] = []  # the turn this job holds now: [], ["shared"] or ["exclusive"]
        paused: list = []
        own: list = []  # this job's worker, from the moment it is chosen (never stopped by the job itself)
        waited = {"turn_wait": 0.0, "timing_wait": 0.0}
        worker = None

        def leave() -> None:
            if not held:
                return
            if held.pop() == "shared":
                self.turns.release_shared()
                return
            for other in paused:
                other.resume()
            paused.clear()
            self.turns.release_exclusive()

        def take(turn: str) -> None:
            if held == [turn] or (alone and held):
                return
            leave()
            if turn == "shared":
                waited["turn_wait"] += self.turns.acquire_shared()
            else:
                waited["timing_wait"] += self.turns.acquire_exclusive()
                with self._lock:  # spares still importing are stopped too: a quiet host
                    paused.extend([w for w in [*self._live, *self._idle] if w not in own])
                for other in paused:
                    other.pause()
            held.append(turn)

        def claim(chosen) -> None:
            """A job run alone took the exclusive turn before choosing its worker, and stopped the
            spares then: the one it chose now runs (a stopped spare would never say it is ready)."""
            own[:] = [chosen]
            if chosen in paused:
                paused.remove(chosen)
                chosen.resume()

        def on_phase(phase: str) -> None:
            if alone:
                return
            if phase == "run":
                if held == ["shared"] and self.turns.state()[2]:
                    leave()  # a checkpoint between the numerics' parts: a waiting timing goes first
                take("shared")
            elif phase == "timing":
                take("exclusive")
            else:  # load, artifacts: CPU work
                leave()

        self._enter(alone)
        try:
            if alone:
                take("exclusive")
            began = time.perf_counter()  # its imports take no turn; its CUDA context comes up in one
            worker = self._ready_worker(job.options.startup_timeout_s,
                                        before_gpu=lambda: take("exclusive" if alone else "shared"),
                                        claim=claim)
            waited["worker_start"] = time.perf_counter() - began - waited["turn_wait"]
            if not alone:
                leave()
            result = worker.run(job, on_phase=on_phase)
        finally:
            leave()
            with self._lock:
                self._live.discard(worker)
            self._leave(alone)
        result.seconds.update({k: round(v, 4) for k, v in waited.items()})
        return result

    def _enter(self, alone: bool) -> None:
        with self._jobs:
            while self._solo:
                self._jobs.wait()
            if alone:
                self._solo = True
                while self._in_flight:
                    self._jobs.wait()
            self._in_flight += 1

    def _leave(self, alone: bool) -> None:
        with self._jobs:
            self._in_flight -= 1
            if alone:
                self._solo = False
            self._jobs.notify_all()

    def close(self) -> None:
        """End the workers started ahead (each job's own worker ends with its job)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


DEFAULT_SPARES = 2 if (os.cpu_count() or 1) >= 8 else 1
"""Workers started ahead by ``screen``'s pool: two where the cores allow, so that a spare has two
screens' worth of time to import torch in both its processes and make its CUDA contexts."""

_default: WorkerPool | None = None


def default_pool() -> WorkerPool:
    """The process-wide pool ``screen`` uses unless given another worker."""
    global _default
    if _default is None:
        _default = WorkerPool(spares=DEFAULT_SPARES)
        atexit.register(_default.close)
    return _default
