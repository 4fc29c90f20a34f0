"""Static diagnosis: authoring defects visible in the compiled artifacts of the launched kernels.

Each kernel's DSL plug-in turns its artifacts into ``KernelFacts`` (its ``facts`` attribute); the
rules in ``rules.py`` read those facts and the problem's cost; the hint of each finding is the
plug-in's text for the code (its ``hints`` attribute) or the generic one (``hints.py``). A kernel
of a DSL whose plug-in supplies no facts gets the facts its artifact model states (grid, threads,
shared memory, spills) and generic hints. Rules work the same on artifacts from a GPU run and on
ahead-of-time artifacts compiled without one.

This runs in the screening parent, which never imports torch or a DSL package: plug-in modules
import them lazily, and their facts are read from text.

Host-side copies in the wrapper (``.contiguous()``, ``.float()``) launch ATen kernels that no
DSL artifact records; seeing them needs the kernel list of a profiled GPU call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kernelgate.diagnosis.facts import KernelFacts
from kernelgate.diagnosis.hints import hint
from kernelgate.diagnosis.rules import RULES, Defect, extra_passes, rules_for
from kernelgate.dsl import plugins
from kernelgate.models import Cost, Finding, KernelArtifact

__all__ = ["diagnose", "kernel_facts", "RULES", "DEFAULT_SM_COUNT"]

DEFAULT_SM_COUNT = 132
"""SMs of an H100/H200 SXM: the sm_90 target of ahead-of-time artifacts."""


def _plugin_attr(dsl: str, attr: str):
    return getattr(plugins().get(dsl), attr, None)


def kernel_facts(k: KernelArtifact) -> KernelFacts:
    """The kernel's facts as its DSL's plug-in reads them, or those its artifact model states."""
    read: Callable[[KernelArtifact], KernelFacts] | None = _plugin_attr(k.dsl, "facts")
    return read(k) if read is not None else KernelFacts.from_artifact(k)


def _finding(defect: Defect, kernel: str | None, dsl_hints: Mapping[str, str] | None) -> Finding:
    return Finding(code=defect.code, kind="repairable", kernel=kernel, evidence=defect.evidence,
                   hint=hint(defect.code, dsl_hints))


def diagnose(kernels: list[KernelArtifact], cost: Cost | None, sm_count: int | None = None) -> list[Finding]:
    """Every finding of every rule on every launched kernel, then those of the launches together."""
    sms = sm_count or DEFAULT_SM_COUNT
    launched = [kernel_facts(k) for k in kernels]
    findings = []
    for k, f in zip(kernels, launched):
        dsl_hints = _plugin_attr(k.dsl, "hints")
        findings += [_finding(d, f.kernel, dsl_hints) for rule in rules_for(f, launched, sms)
                     if (d := rule(f, cost, sms)) is not None]
    if (extra := extra_passes(launched, cost)) is not None:
        findings.append(_finding(extra, None, None))
    return findings
