"""Turns on one GPU: many workers may prepare together, one times alone.

A lane that screens several candidates at once on one GPU lets their workers start, compile,
check numerics and build artifacts side by side (a *shared* turn: CPU cores compile in parallel,
and a few short kernels interleave on the GPU, which numerics do not mind), but a candidate is
timed in an *exclusive* turn: no other worker of the lane is starting, compiling or running
anything then, so the timing sees the same quiet machine as a lane that screens one candidate at
a time.

Exclusive turns go first: once a worker asks for one, no new shared turn begins, the shared
turns in progress finish (or reach their own timing), and the waiting timings run one after
another. Timings only come from workers that held a shared turn, so shared turns cannot starve.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["GpuTurns"]


class GpuTurns:
    """A readers-writer lock with writer preference, and the seconds spent waiting for it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._sharing = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    def acquire_shared(self) -> float:
        """Wait until no timing runs or waits; returns the seconds waited."""
        began = time.perf_counter()
        with self._cond:
            while self._exclusive or self._waiting_exclusive:
                self._cond.wait()
            self._sharing += 1
        return time.perf_counter() - began

    def release_shared(self) -> None:
        with self._cond:
            if self._sharing <= 0:
                raise RuntimeError("release_shared without a shared turn")
            self._sharing -= 1
            self._cond.notify_all()

    def acquire_exclusive(self) -> float:
        """Wait until nothing else holds a turn; returns the seconds waited."""
        began = time.perf_counter()
        with self._cond:
            self._waiting_exclusive += 1
            try:
                while self._exclusive or self._sharing:
                    self._cond.wait()
            finally:
                self._waiting_exclusive -= 1
            self._exclusive = True
        return time.perf_counter() - began

    def release_exclusive(self) -> None:
        with self._cond:
            if not self._exclusive:
                raise RuntimeError("release_exclusive without the exclusive turn")
            self._exclusive = False
            self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()

    def state(self) -> tuple[int, bool, int]:
        """(shared turns held, exclusive held, exclusive turns waiting): for tests and logs."""
        with self._cond:
            return self._sharing, self._exclusive, self._waiting_exclusive
