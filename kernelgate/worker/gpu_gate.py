"""A clock the candidate's process does not control: its GPU work waits for a word the judge stores.

For the judge-clocked stream (``Screen._stream``, ``ScreenOptions.stream_check``) the candidate's
process enqueues on its stream a wait until a word in shared host memory reaches a value
(``cuStreamWaitValue32`` on the word, pinned and mapped for the GPU with ``cuMemHostRegister``),
then its calls, then a record of an interprocess event the judge made, and replies at once; the
judge stops it (SIGSTOP), writes fresh inputs, stores the word and polls the event. Its host clock
then covers the GPU work of the calls, and none of the candidate's host work, which was done before
the clock started. The library's stream is timed the same way in the judge's own process, behind a
second word of the same page.

Measured on an H100 (2026-12-06, ``benchmarks/results/probe_host_flag_clock_h100.json``): enqueueing
the wait took the candidate's host 0.06 to 0.13 ms without blocking it, and the judge's clock around
an empty call read 0.154 ms, p10 to p90 0.150 to 0.166 ms. A kernel launched behind the wait for the
first time in a process can block the host until the word is stored (CUDA's lazy module loading),
so the judge stores the word after ``ENQUEUE_S`` without a reply and times that stream from there:
host work after the word counts against the candidate, never for it. The judge's own work that
synchronizes while it is enqueued is run plainly instead (``JudgeGate.time_own``).
"""

from __future__ import annotations

import base64
import ctypes
import functools
import os
import time
from pathlib import Path

WORDS = 1024
"""int32 words in the flag file: one 4 KiB page."""
CANDIDATE_WORD, JUDGE_WORD = 0, 1
ENQUEUE_S = 2.0
"""How long the judge waits for a gated stream's enqueue before it stores the word anyway."""
_WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ: (int32)(*address - value) >= 0
_REGISTER_PORTABLE, _REGISTER_DEVICEMAP = 0x1, 0x2


class GateError(RuntimeError):
    """A driver call of the gate failed (the message names it and its CUresult)."""


@functools.lru_cache(maxsize=1)
def _driver():
    return ctypes.CDLL("libcuda.so.1")


@functools.lru_cache(maxsize=1)
def _wait_fn():
    wait = _driver().cuStreamWaitValue32_v2
    wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    return wait


def _check(code: int, what: str) -> None:
    if code != 0:
        raise GateError(f"{what} returned CUresult {code}")


class FlagPage:
    """The words both processes map: a 4 KiB file in ``/dev/shm`` (or a temporary folder)."""

    def __init__(self, path: Path, *, create: bool) -> None:
        import torch

        if create:
            with open(path, "wb") as handle:
                handle.write(bytes(4 * WORDS))
        self.path = path
        self.words = torch.from_file(str(path), shared=True, size=WORDS, dtype=torch.int32)
        self._device_base: int | None = None

    def store(self, word: int, value: int) -> None:
        self.words[word] = value

    def device_address(self, word: int) -> int:
        """The word's address for this process's GPU context (the page is registered once)."""
        if self._device_base is None:
            driver = _driver()
            register = getattr(driver, "cuMemHostRegister_v2", None) or driver.cuMemHostRegister
            register.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
            _check(register(ctypes.c_void_p(self.words.data_ptr()), ctypes.c_size_t(4 * WORDS),
                            ctypes.c_uint(_REGISTER_PORTABLE | _REGISTER_DEVICEMAP)), "cuMemHostRegister")
            base = ctypes.c_uint64()
            pointer = getattr(driver, "cuMemHostGetDevicePointer_v2", None) or driver.cuMemHostGetDevicePointer
            pointer.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
            _check(pointer(ctypes.byref(base), ctypes.c_void_p(self.words.data_ptr()), ctypes.c_uint(0)),
                   "cuMemHostGetDevicePointer")
            self._device_base = base.value
        return self._device_base + 4 * word

    def close(self) -> None:
        if self._device_base is not None:
            driver = _driver()
            driver.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
            driver.cuMemHostUnregister(ctypes.c_void_p(self.words.data_ptr()))
            self._device_base = None


def wait_value(address: int, value: int) -> None:
    """Enqueue on the current stream a wait until the word at ``address`` reaches ``value``."""
    import torch

    _check(_wait_fn()(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), ctypes.c_uint64(address),
                ctypes.c_uint32(value), ctypes.c_uint(_WAIT_GEQ)), "cuStreamWaitValue32")


def until_complete(event, deadline: float) -> float:
    """Poll ``event`` from the host; the ``perf_counter`` when it completed (or when ``deadline``,
    a ``time.monotonic``, passed)."""
    while not event.query():
        if time.monotonic() > deadline:
            break
    return time.perf_counter()


class JudgeGate:
    """The judge's side: the page, the interprocess event the candidate records, the values."""

    def __init__(self, folder: Path) -> None:
        import torch

        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else str(folder)
        self.page = FlagPage(Path(base) / f"kernelgate-gate-{os.getpid()}-{id(self):x}", create=True)
        self.event = torch.cuda.Event(interprocess=True)
        self.value = 0
        self.overhead_ms: float | None = None
        """The judge's own gated round trip with nothing in it (``library_overhead``)."""

    def request(self) -> dict:
        """What the candidate's process needs to map the page and record the event."""
        return {"path": str(self.page.path), "event": base64.b64encode(bytes(self.event.ipc_handle())).decode()}

    def next_value(self) -> int:
        self.value += 1
        return self.value

    def release(self, value: int) -> float:
        """Store the candidate's word; the judge's clock starts here."""
        began = time.perf_counter()
        self.page.store(CANDIDATE_WORD, value)
        return began

    def time_own(self, enqueue, deadline_s: float) -> tuple[float, bool]:
        """The judge's own work behind its word: ``enqueue()`` queues it on the current stream behind
        the wait. (ms from the store until it completed, False), or, for work that synchronizes
        while it is enqueued (it would wait for itself), (ms of a plain run from its start to a
        sync, True). torch's sync debug mode tells: a synchronizing call raises instead of
        blocking, and the word is stored at once."""
        import torch

        value = self.next_value()
        done = torch.cuda.Event()
        wait_value(self.page.device_address(JUDGE_WORD), value)
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            enqueue()
            done.record()
            synchronizes = False
        except RuntimeError:
            synchronizes = True
        finally:
            torch.cuda.set_sync_debug_mode(previous)
        if synchronizes:
            self.page.store(JUDGE_WORD, value)
            torch.cuda.synchronize()
            began = time.perf_counter()
            enqueue()
            torch.cuda.synchronize()
            return (time.perf_counter() - began) * 1e3, True
        began = time.perf_counter()
        self.page.store(JUDGE_WORD, value)
        ended = until_complete(done, time.monotonic() + deadline_s)
        torch.cuda.synchronize()
        return (ended - began) * 1e3, False

    def library_overhead(self, deadline_s: float, again: bool = False) -> float:
        """The median of eight empty gated round trips in the judge's process, in ms (cached;
        ``again``: measured anew, as in the timing turn, where no other screen uses the GPU)."""
        if self.overhead_ms is None or again:
            times = sorted(self.time_own(lambda: None, deadline_s)[0] for _ in range(8))
            self.overhead_ms = (times[3] + times[4]) / 2
        return self.overhead_ms

    def close(self) -> None:
        self.page.store(CANDIDATE_WORD, 1 << 30)  # nothing may stay queued behind a word
        self.page.store(JUDGE_WORD, 1 << 30)
        self.page.close()
        try:
            os.unlink(self.page.path)
        except OSError:
            pass


class CandidateGate:
    """The candidate's side: the page mapped for its context, and the judge's event."""

    def __init__(self, request: dict) -> None:
        import torch

        self.page = FlagPage(Path(request["path"]), create=False)
        self.address = self.page.device_address(CANDIDATE_WORD)
        self.event = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(),
                                                      base64.b64decode(request["event"]))
