"""Exceptions for caller mistakes and faults of the gate itself.

A bad candidate never raises: it becomes a ``reject`` verdict with a reason. These are for
everything else::

    KernelgateError
    ├── ProblemError        the problem cannot be loaded or built (a caller mistake)
    ├── PluginError         a DSL plug-in breaks its contract (names the plug-in)
    ├── NoGPUError          an operation that needs a GPU was asked for on a machine without one
    ├── CalibrationError    measuring the device's ceilings failed
    └── WorkerError         the gate's own worker machinery failed (not the candidate)
"""

from __future__ import annotations

__all__ = [
    "KernelgateError",
    "ProblemError",
    "PluginError",
    "NoGPUError",
    "CalibrationError",
    "WorkerError",
]


class KernelgateError(Exception):
    """Base of every exception kernelgate raises on purpose."""


class ProblemError(KernelgateError):
    """The problem (reference op, KernelBench file, shapes) cannot be loaded or built."""


class PluginError(KernelgateError):
    """A DSL plug-in does not satisfy the plug-in contract."""

    def __init__(self, plugin: str, message: str) -> None:
        super().__init__(f"DSL plug-in {plugin!r}: {message}")
        self.plugin = plugin
        self.message = message

    def __reduce__(self):
        # args holds the formatted text; rebuild from the two fields so that one raised in
        # another process (a worker, a Ray task) comes back as itself
        return (type(self), (self.plugin, self.message))


class NoGPUError(KernelgateError):
    """A GPU is required and none is visible."""


class CalibrationError(KernelgateError):
    """Measuring the ceilings of the present GPU failed."""


class WorkerError(KernelgateError):
    """The worker machinery failed for a reason that is not the candidate's."""
