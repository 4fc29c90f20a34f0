"""What the two cross-process clock probes share (``handshake_clock.py``, ``host_flag_clock.py``):
the candidate's side reporting its errors instead of dying silently, the teardown, the summaries.
Imports nothing of kernelgate."""

from __future__ import annotations

import faulthandler
import statistics
from typing import Callable


def serve_reporting(serve: Callable, conn, *args, stuck_s: float) -> None:
    """Run the candidate's side; an error goes back to the judge as ("error", text) instead of
    leaving it waiting, and a side stuck for ``stuck_s`` prints its stack on stderr."""
    faulthandler.dump_traceback_later(stuck_s)
    try:
        serve(conn, *args)
    except Exception as exc:  # noqa: BLE001 - reported to the judge, which records it
        conn.send(("error", f"candidate side: {type(exc).__name__}: {exc}"))


def stop(child, conn, error: str | None) -> None:
    """End the candidate's side: asked to stop when all went well, killed when it does not end."""
    faulthandler.cancel_dump_traceback_later()
    if child.is_alive() and error is None:
        conn.send(None)
    child.join(timeout=10)
    if child.is_alive():
        child.kill()


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p10": ordered[len(ordered) // 10],
            "p90": ordered[(9 * len(ordered)) // 10], "min": ordered[0], "max": ordered[-1]}
