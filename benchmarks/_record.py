"""The header every results JSON starts with: the command, the date, the device and the versions."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path


def run_header(script: str, argv: list[str] | None = None) -> dict:
    """``script``: how the command starts (``python benchmarks/study.py``); ``argv``: its arguments."""
    import torch
    import triton

    from kernelgate import __version__
    from kernelgate.hardware import detect

    device = detect()
    try:
        import tilelang

        tilelang_version = tilelang.__version__
    except Exception:  # not installed, or broken: the record says so instead of failing
        tilelang_version = None
    return {
        "command": " ".join([script, *(sys.argv[1:] if argv is None else argv)]),
        "commit": commit(),
        "device_uuid": device_uuid(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.model_dump(mode="json") if device is not None else {"name": f"cpu ({platform.machine()})"},
        "versions": {"kernelgate": __version__, "torch": torch.__version__, "triton": triton.__version__,
                     "tilelang": tilelang_version, "python": platform.python_version(), "cuda": torch.version.cuda},
    }


def commit() -> str | None:
    """The commit the run was made at: ``KERNELGATE_COMMIT`` (set by whoever ships the tree to a
    machine without its git history), else ``git rev-parse HEAD``; a tree with uncommitted changes
    to tracked files gets ``+dirty``."""
    root = Path(__file__).resolve().parent.parent
    if os.environ.get("KERNELGATE_COMMIT"):
        return os.environ["KERNELGATE_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def device_uuid() -> str | None:
    """The GPU's UUID (``nvidia-smi -L``), or None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if "UUID:" in line:
            return line.split("UUID:", 1)[1].strip(" )")
    return None
