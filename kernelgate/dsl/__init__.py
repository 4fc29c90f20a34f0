"""DSL plug-ins: the one interface through which the worker loads, runs and inspects candidates.

A plug-in is an object with the attributes of ``DSLPlugin`` (checked when it registers, not when
the first candidate reaches it). Built-ins are listed in ``BUILTIN_PLUGINS``; outside packages add
theirs through the entry-point group ``kernelgate.dsl`` (each entry point names a plug-in object).
Adding CuTe or cuTile means one new module here and one line in ``BUILTIN_PLUGINS``.

Life of a candidate inside a worker, as the plug-in sees it::

    log = plugin.prepare(interpret=...)        # before the candidate is imported: hooks, env
    module = import_candidate(path)            # generic; errors go through plugin.classify_error
    ... forward calls; log.reset() / log.total() count this DSL's launches ...
    plugin.artifacts(log, path, interpret=...) # compiled kernels: IR, PTX, SASS, registers
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kernelgate.errors import PluginError
from kernelgate.models import KernelArtifact, Reason

__all__ = [
    "DSLPlugin",
    "Launch",
    "LaunchLog",
    "register",
    "get_plugin",
    "plugins",
    "detect_dsl",
    "kernelbench_backends",
    "BUILTIN_PLUGINS",
]

BUILTIN_PLUGINS = ("kernelgate.dsl.tilelang:PLUGIN", "kernelgate.dsl.cuda:PLUGIN", "kernelgate.dsl.helion:PLUGIN", "kernelgate.dsl.triton:PLUGIN")
"""Built-in plug-ins as ``module:attribute``, in detection order: a TileLang or CUDA candidate may
also import triton (for ``triton.cdiv``), a Triton candidate rarely imports the others."""

ENTRY_POINT_GROUP = "kernelgate.dsl"


@dataclass
class Launch:
    """The first launch of one kernel: enough to compile it again for another target."""

    kernel: Any
    """The DSL's own kernel object (e.g. a Triton ``InterpretedFunction`` or ``JITFunction``)."""
    args: tuple
    kwargs: dict
    grid: list[int] | None
    compiled: Any = None
    """The DSL's compiled object when the launch compiled one (a Triton ``CompiledKernel``)."""


@dataclass
class LaunchLog:
    """Launches of the candidate's DSL kernels, by kernel name, since the last ``reset``."""

    first: dict[str, Launch] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    compile_errors: list[str] = field(default_factory=list)
    """Compiler messages found while collecting artifacts (a kernel the interpreter ran but ``triton.compile`` rejects)."""
    first_call_seconds: dict[str, float] = field(default_factory=dict)
    """Host time of each kernel's first launch: JIT compilation, nearly all of it."""
    dry_run: bool = False
    """Record launches without running them (static checks of a problem too large to interpret)."""
    problem_dtype: str | None = None
    """The problem's dtype (``float32``...): picks a templated kernel's instantiation in the artifacts."""
    tuning: int = 0
    """Above zero while a DSL autotuner times its configs: those launches are not the candidate's own."""
    notes: list[str] = field(default_factory=list)
    """What the plug-in wants said on the verdict about how it ran the kernels."""

    def record(self, name: str, launch: Launch) -> None:
        self.first.setdefault(name, launch)
        self.counts[name] = self.counts.get(name, 0) + 1

    def reset(self) -> None:
        self.counts = {}

    def total(self) -> int:
        return sum(self.counts.values())


@runtime_checkable
class DSLPlugin(Protocol):
    """What a DSL plug-in provides.

    Two optional attributes feed the static diagnosis, which runs in the screening parent and so
    must import no DSL package (read the artifacts as text):

    - ``facts(artifact) -> kernelgate.diagnosis.facts.KernelFacts``: what the kernel's artifacts
      show, in no DSL's terms (``kernelgate.dsl.ptx_facts.ptx_facts`` reads the PTX part);
    - ``hints: dict[str, str]``: the fix for each finding code in this DSL's terms.

    Without ``facts`` a kernel is judged on what its ``KernelArtifact`` states (grid, threads,
    shared memory, spills); a code with no entry in ``hints`` gets a generic text."""

    name: str
    """Short name used in ``Candidate.dsl`` and on verdicts (``triton``)."""

    def detect(self, source: str) -> bool:
        """Whether the source is written in this DSL (imports and decorators, not execution)."""

    def versions(self) -> dict[str, str]:
        """Versions of the packages this DSL needs, for the verdict's environment."""

    def prepare(self, *, interpret: bool) -> LaunchLog:
        """Set the DSL up in this (worker) process before the candidate is imported; hook launches."""

    def classify_error(self, exc: BaseException) -> tuple[Reason, str] | None:
        """Map a DSL exception (a compiler error) to a reason and a trimmed message; None if foreign."""

    def artifacts(self, log: LaunchLog, source_path: Path, *, interpret: bool) -> tuple[list[KernelArtifact], list[str]]:
        """Compiled artifacts of every launched kernel, and notes on what could not be had."""


_REGISTRY: dict[str, DSLPlugin] = {}
_loaded = False
_LOAD_LOCK = threading.RLock()

_REQUIRED = ("name", "detect", "versions", "prepare", "classify_error", "artifacts")


def register(plugin: Any) -> None:
    """Add a plug-in after checking that it has the whole interface."""
    label = getattr(plugin, "name", repr(plugin))
    missing = [attr for attr in _REQUIRED if not hasattr(plugin, attr)]
    if missing:
        raise PluginError(str(label), f"missing {', '.join(missing)}")
    if not isinstance(plugin.name, str) or not plugin.name:
        raise PluginError(str(label), "name must be a non-empty string")
    for attr in _REQUIRED[1:]:
        if not callable(getattr(plugin, attr)):
            raise PluginError(plugin.name, f"{attr} is not callable")
    _REGISTRY[plugin.name] = plugin


def _load_builtins() -> None:
    # Under a lock, and marked loaded only once complete: screen_many's lanes call this from
    # several threads, and a half-filled registry would make a Triton source look like no DSL.
    global _loaded
    with _LOAD_LOCK:
        if _loaded:
            return
        for ref in BUILTIN_PLUGINS:
            module_name, attr = ref.split(":")
            register(getattr(importlib.import_module(module_name), attr))
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                register(entry.load())
            except PluginError:
                raise
            except Exception as exc:  # a broken third-party package must say who it is
                raise PluginError(entry.name, f"entry point failed to load: {exc}") from exc
        _loaded = True


def plugins() -> dict[str, DSLPlugin]:
    _load_builtins()
    return dict(_REGISTRY)


def get_plugin(name: str) -> DSLPlugin:
    available = plugins()
    if name not in available:
        raise PluginError(name, f"no such DSL; available: {', '.join(sorted(available))}")
    return available[name]


def kernelbench_backends() -> dict[str, str]:
    """KernelBench backend name -> plug-in name, for every plug-in that declares one
    (``kernelbench_backend``): the one list the KernelBench adapter and the CLI read."""
    return {p.kernelbench_backend: name for name, p in plugins().items() if getattr(p, "kernelbench_backend", None)}


def detect_dsl(source: str) -> str | None:
    """The name of the first plug-in that recognizes the source, or None."""
    for name, plugin in plugins().items():
        if plugin.detect(source):
            return name
    return None
