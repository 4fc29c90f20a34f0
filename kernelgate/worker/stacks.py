"""Where a hung process was: its Python stack, taken just before it is killed.

The judge and the candidate's process each ``arm()`` at start: ``faulthandler`` writes every
thread's stack to a file of their own on ``SIGUSR1``, from a C signal handler, so it answers while
the main thread is blocked in a driver call (a kernel that never ends). ``where()`` asks for that
dump and turns it into one line for a verdict's message: the innermost frames of the main thread,
or the process's state where it cannot answer (stopped between requests, gone). It is a diagnosis
only; nothing in it decides a verdict.
"""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import time
from pathlib import Path

__all__ = ["arm", "where", "summarize"]

DUMP_WAIT_S = 1.0
"""How long ``where`` waits for a dump to be written."""
FRAMES = 3
"""Innermost frames of the main thread in the one-line summary."""
JUDGE_DUMP = "judge.stack"
"""In the worker's directory."""
CANDIDATE_DUMP = "candidate.stack"
"""In the candidate's directory (``candidate/`` of the worker's)."""

_dump_file = None  # kept open for the process's life: faulthandler writes to its descriptor


def arm(path: Path) -> None:
    """Write all threads' stacks to ``path`` on SIGUSR1 (appended; ``where`` empties it before it asks)."""
    global _dump_file
    _dump_file = open(path, "a")  # noqa: SIM115  (open until the process ends; appends: see where())
    faulthandler.register(signal.SIGUSR1, file=_dump_file, all_threads=True, chain=False)


def _state(pid: int) -> str | None:
    """The kernel's one-letter state of ``pid`` (R, S, D, T, t, Z...), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def where(pid: int, path: Path, wait_s: float = DUMP_WAIT_S) -> str:
    """One line saying where ``pid`` was: its main thread's innermost frames, or its state."""
    state = _state(pid)
    if state is None or state == "Z":
        return "gone"
    if state in ("T", "t"):
        return "stopped"
    try:
        if path.exists():
            os.truncate(path, 0)  # the dumper appends, so a truncated file fills from its start
        os.kill(pid, signal.SIGUSR1)
    except OSError as exc:
        return f"no stack ({exc.strerror})"
    until, text = time.monotonic() + wait_s, ""
    while time.monotonic() < until:  # done when the dump has stopped growing
        time.sleep(0.05)
        try:
            now = path.read_text(errors="replace")
        except OSError:
            now = ""
        if now and now == text:
            break
        text = now
    return summarize(text) or "no stack (it did not answer)"


_FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>\S+)')


def summarize(dump: str) -> str:
    """The main thread's innermost ``FRAMES`` frames of a faulthandler dump, innermost first:
    ``candidate.py:18 in kernel <- kernelgate/worker/candidate.py:128 in call``. The thread that took the signal (the main
    one) is marked ``Current thread``."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", dump.strip())
    main = next((b for b in blocks if b.startswith("Current thread")), blocks[0] if blocks else "")
    frames = [f"{_short(m['file'])}:{m['line']} in {m['func']}" for m in _FRAME.finditer(main)]
    return " <- ".join(frames[:FRAMES])


def _short(path: str) -> str:
    """kernelgate's own files from the package (``kernelgate/worker/candidate.py``), any other by
    name (the candidate's source is ``candidate.py``)."""
    parts = Path(path).parts
    if "kernelgate" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("kernelgate"):])
    return Path(path).name
