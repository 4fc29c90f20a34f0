"""A helper for kernel authors' own tests: assert that a kernel passes the gate.

    from kernelgate import Problem
    from kernelgate.testing import assert_accepted

    def test_my_rowsum():
        assert_accepted("kernels/rowsum.py", Problem.op("rowsum", rows=64, cols=1024), entry="kernel")

On a GPU the kernel must be ``accept``ed. Without one nothing can be timed, so an ``untimed``
verdict (numerics checked in the interpreter, no defect found in the compiled code) passes too,
unless ``allow_untimed_on_cpu=False``. On failure the ``AssertionError`` carries the verdict's
summary, reason, feedback and findings, so the test report says what to fix.
"""

from __future__ import annotations

from pathlib import Path

from kernelgate.models import Candidate, Problem, Status, Verdict
from kernelgate.policy import DEFAULT_POLICY, Policy
from kernelgate.worker import ScreenOptions

__all__ = ["assert_accepted"]


def _source(source_or_path: str | Path) -> tuple[str, str | None]:
    if isinstance(source_or_path, Path) or ("\n" not in source_or_path and source_or_path.endswith(".py")):
        path = Path(source_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"kernel file not found: {path}")
        return path.read_text(), path.name
    return source_or_path, None


def assert_accepted(source_or_path: str | Path, problem: Problem, *, policy: Policy | None = None,
                    allow_untimed_on_cpu: bool = True, entry: str = "ModelNew", dsl: str | None = None,
                    options: ScreenOptions | None = None) -> Verdict:
    """Screen the kernel (a source string or a ``.py`` path) and fail unless it is accepted.

    ``untimed`` passes only when ``allow_untimed_on_cpu`` is set and the screen ran without a GPU
    and the numerics were actually checked. Returns the verdict for further assertions.
    """
    from kernelgate.gate import screen

    source, name = _source(source_or_path)
    verdict = screen(Candidate(source=source, entry=entry, dsl=dsl, name=name), problem,
                     policy=policy or DEFAULT_POLICY, options=options)
    if verdict.status is Status.accept:
        return verdict
    no_gpu = verdict.environment is None or verdict.environment.device is None
    checked = bool(verdict.numerics and verdict.numerics.checked and verdict.numerics.passed)
    if verdict.status is Status.untimed and allow_untimed_on_cpu and no_gpu and checked:
        return verdict
    lines = [f"kernel not accepted: {verdict.summary}"]
    if verdict.status is Status.untimed:
        why = ("numerics were not checked" if not checked else "a GPU was present" if not no_gpu
               else "untimed verdicts are not allowed here (allow_untimed_on_cpu=False)")
        lines.append(f"untimed: {why}" + (f" ({verdict.numerics.skipped_reason})"
                                         if verdict.numerics and verdict.numerics.skipped_reason else ""))
    if verdict.reason is not None:
        lines.append(f"reason: {verdict.reason.value}")
    lines.append("feedback: " + verdict.feedback.replace("\n", "\n  "))
    lines += [f"finding: {f.code} ({f.kind}): {f.evidence}" for f in verdict.findings]
    raise AssertionError("\n".join(lines))
