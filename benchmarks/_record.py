"""The header every results JSON starts with: the command, the date, the device and the versions."""

from __future__ import annotations

import datetime
import platform
import sys


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
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.model_dump(mode="json") if device is not None else {"name": f"cpu ({platform.machine()})"},
        "versions": {"kernelgate": __version__, "torch": torch.__version__, "triton": triton.__version__,
                     "tilelang": tilelang_version, "python": platform.python_version(), "cuda": torch.version.cuda},
    }
