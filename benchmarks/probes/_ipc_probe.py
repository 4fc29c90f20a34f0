"""What the two cross-process clock probes share (``handshake_clock.py``, ``host_flag_clock.py``):
the candidate's side reporting its errors instead of dying silently, the teardown, the summaries.
Imports nothing of kernelgate."""

from __future__ import annotations

import faulthandler
import os
import statistics
import subprocess
from pathlib import Path
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


def warm_up(torch, x, y) -> None:
    """Launch every kernel the candidate's side will enqueue behind a wait, once, before any wait.
    With lazy module loading (CUDA's default) the first launch of a kernel loads its module, and
    that waits for the context's queued work: behind a stream wait that only the flag releases, the
    launch blocks the host until the judge stores the flag. On an H100 (2026-12-06) the first
    ``torch.cuda._sleep`` behind the wait blocked for the whole 20 s reply limit."""
    torch.cuda._sleep(1000)
    torch.mul(x[:1], 2.0, out=y[:1])  # the short and the long forms of the elementwise kernel
    torch.mul(x, 2.0, out=y)
    torch.cuda.synchronize()


def provenance(torch) -> dict:
    """The commit (``KERNELGATE_COMMIT`` on the device, else git here) and the GPU's UUID, for the record."""
    commit = os.environ.get("KERNELGATE_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                                    capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = None
    props = torch.cuda.get_device_properties(0)
    uuid = str(getattr(props, "uuid", "")) or None
    return {"commit": commit, "device_uuid": f"GPU-{uuid}" if uuid and not uuid.startswith("GPU-") else uuid}
