"""kernelgate: screen LLM-written GPU kernels before anyone trusts them.

    from kernelgate import screen, Candidate, Problem
    verdict = screen(Candidate(source=src), Problem.op("layernorm"))
    verdict.status, verdict.feedback
"""

from __future__ import annotations

__version__ = "0.1.0"

from kernelgate.errors import (  # noqa: E402
    CalibrationError,
    KernelgateError,
    NoGPUError,
    PluginError,
    ProblemError,
    WorkerError,
)
from kernelgate.models import Candidate, Finding, Metrics, Problem, Reason, Status, Verdict  # noqa: E402
from kernelgate.policy import DEFAULT_POLICY, Policy  # noqa: E402
from kernelgate.worker import ScreenOptions  # noqa: E402
from kernelgate.gate import screen  # noqa: E402
from kernelgate.many import ScreenResult, screen_many  # noqa: E402

__all__ = [
    "__version__",
    "screen",
    "screen_many",
    "ScreenResult",
    "Candidate",
    "Problem",
    "Verdict",
    "Status",
    "Reason",
    "Finding",
    "Metrics",
    "Policy",
    "DEFAULT_POLICY",
    "ScreenOptions",
    "KernelgateError",
    "ProblemError",
    "PluginError",
    "NoGPUError",
    "CalibrationError",
    "WorkerError",
]
