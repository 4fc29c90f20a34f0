"""Helion plug-in: Helion kernels are screened as the Triton code Helion generates from them.

A Helion candidate decorates a function with ``@helion.kernel``. On its first call Helion picks a
config (block sizes, warps, stages...), generates a Triton module from the function for that
config, and from then on every call of the kernel launches the ``@triton.jit`` function of that
module (``_helion_<name>``) through ``JITFunction.run``. So this plug-in is the Triton plug-in's
launch hooks plus what Helion adds:

- **configs without a long autotune.** A config written in the source (``config=`` or a single
  ``configs=[...]`` entry) is used as it is. A kernel without one runs Helion's default config
  (what ``autotune_effort="none"`` would run), whatever effort the source asks for: Helion's full
  search takes minutes and would be timed against the load deadline. Several configs in the
  source are searched by Helion's own autotuner on a GPU (those timing launches are not the
  candidate's); without a GPU the first one runs. The verdict's notes name the config that ran.
- **launches are the generated Triton kernels'.** The launch log counts ``_helion_<name>`` per
  call, and on a GPU those are the exact names of the compiled kernels, so the judge's profiler
  attributes their device time to the candidate.
- **without a GPU** the generated Triton runs in Triton's interpreter (the same code a GPU would
  compile, not Helion's eager reference mode), with libdevice math supplied by numpy
  (``interpret.py``), and the artifacts are that generated module compiled ahead of time for
  sm_90 by the Triton plug-in's compiler process.
- **where Helion writes.** Its generated modules go to torch's code cache; it is pointed next to
  Triton's cache (``TORCHINDUCTOR_CACHE_DIR``), inside the directories a candidate may write.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from kernelgate.dsl import LaunchLog
from kernelgate.dsl.helion import facts as helion_facts
from kernelgate.integrity import compiler_section
from kernelgate.models import KernelArtifact, Reason

__all__ = ["PLUGIN", "HelionPlugin", "config_summary"]

_IMPORT_RE = re.compile(r"^\s*(import\s+helion\b|from\s+helion\b)|@\s*helion\.kernel\b", re.MULTILINE)

_ENV = {
    "HELION_AUTOTUNE_EFFORT": "none",  # a kernel without a config runs the default one
    "HELION_AUTOTUNE_PROGRESS_BAR": "0",
    "HELION_AUTOTUNE_BENCHMARK_SUBPROCESS": "0",  # a search among the source's configs starts no processes
    "HELION_AUTOTUNE_PRECOMPILE": "0",
}
"""Helion settings the gate decides, not the candidate's environment."""

_SHOWN_KEYS = ("block_sizes", "num_warps", "num_stages", "pid_type", "indexing", "reduction_loops", "loop_orders",
               "l2_groupings", "range_unroll_factors", "range_num_stages")
"""Config entries named in the verdict's notes (the rest are Helion's defaults or rarely decisive)."""


def config_summary(config: Any) -> str:
    """``helion.Config(block_sizes=[1], num_warps=16, ...)`` with the entries that matter to a reader."""
    items = dict(config) if hasattr(config, "keys") else {}
    shown = [f"{k}={items[k]!r}" for k in _SHOWN_KEYS if k in items and items[k] not in ([], None)]
    return f"helion.Config({', '.join(shown)})"


def _kernel_name(bound: Any) -> str:
    kernel = getattr(bound, "kernel", None)
    return str(getattr(kernel, "name", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel"))


class HelionPlugin:
    name = "helion"
    facts = staticmethod(helion_facts.facts)
    """DSL-neutral facts of one compiled kernel: those of the generated Triton (text only)."""
    hints = helion_facts.HINTS
    """The fix for each finding code, in Helion's terms (``hl.tile``, ``helion.Config``)."""

    def __init__(self) -> None:
        self.ran: dict[str, dict[str, str]] = {}
        """Helion kernel name -> {config, how it was chosen, generated file}, for notes and artifacts."""

    def detect(self, source: str) -> bool:
        return bool(_IMPORT_RE.search(source))

    def versions(self) -> dict[str, str]:
        import importlib.metadata

        import triton

        return {"helion": importlib.metadata.version("helion"), "triton": triton.__version__}

    def prepare(self, *, interpret: bool) -> LaunchLog:
        from kernelgate.dsl.triton import PLUGIN as TRITON

        os.environ.update(_ENV)
        os.environ.pop("HELION_INTERPRET", None)  # Helion refuses both interpreters at once; ours is Triton's
        triton_cache = os.environ.get("TRITON_CACHE_DIR")
        if triton_cache:  # generated modules beside Triton's cache: where the guard lets compilers write
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(triton_cache).parent / "helion")
        log = TRITON.prepare(interpret=interpret)
        if interpret:
            from kernelgate.dsl.helion import interpret as interp

            interp.install()
        import tqdm

        # torch.fx's interpreter (Helion's code generator) opens a disabled tqdm bar, whose first use
        # starts a monitor thread that outlives the call: the guard would take it for background work.
        tqdm.tqdm.monitor_interval = 0
        import helion  # noqa: F401  (imported before the guard is armed: its import patches torch lazily)

        self.ran = {}
        _hook_binding()
        _hook_config_choice(log, interpret, self.ran)
        return log

    def classify_error(self, exc: BaseException) -> tuple[Reason, str] | None:
        from kernelgate.dsl.triton import PLUGIN as TRITON

        try:
            from helion import exc as helion_exc
        except ImportError:
            helion_exc = None
        chain: BaseException | None = exc
        while chain is not None:
            if helion_exc is not None and isinstance(chain, helion_exc.Base):
                return Reason.compile_error, _trim(f"Helion: {type(chain).__name__}: {chain}")
            chain = chain.__cause__ or chain.__context__
        return TRITON.classify_error(exc)

    def artifacts(self, log: LaunchLog, source_path: Path, *, interpret: bool) -> tuple[list[KernelArtifact], list[str]]:
        from kernelgate.dsl.triton import PLUGIN as TRITON
        from kernelgate.dsl.triton import _artifacts_ahead_of_time

        notes: list[str] = []
        if interpret:
            from kernelgate.dsl.helion import interpret as interp

            notes.append(interp.INSTALLED_NOTE)
            found: list[KernelArtifact] = []
            for generated, names in _by_generated_file(log).items():
                if generated is None:
                    notes.append(f"no artifacts for {', '.join(names)}: the generated module's file is not known")
                    continue
                part = LaunchLog(first={n: log.first[n] for n in names}, counts={n: log.counts.get(n, 0) for n in names})
                kernels, more = _artifacts_ahead_of_time(part, Path(generated))
                log.compile_errors.extend(part.compile_errors)
                found += kernels
                notes += more
            notes = log.notes + notes
        else:
            found, notes = TRITON.artifacts(log, source_path, interpret=False)
        return [_as_helion(k, log, source_path) for k in found], notes


def _by_generated_file(log: LaunchLog) -> dict[str | None, list[str]]:
    """Launched kernels grouped by the file of the module Helion generated them into."""
    groups: dict[str | None, list[str]] = {}
    for name, launch in log.first.items():
        fn = getattr(launch.kernel, "fn", None)
        path = getattr(getattr(fn, "__code__", None), "co_filename", None)
        groups.setdefault(path if path and os.path.isfile(path) else None, []).append(name)
    return groups


def _block_constants(launch: Any) -> dict[str, Any]:
    """The generated module's ``_BLOCK_SIZE_<i> = tl.constexpr(n)``: Helion's block sizes, as constexprs."""
    fn = getattr(getattr(launch, "kernel", None), "fn", None)
    found = {}
    for key, value in (getattr(fn, "__globals__", None) or {}).items():
        if key.startswith("_BLOCK_SIZE_") or key.startswith("_RDIM_SIZE_"):
            value = getattr(value, "value", value)
            if isinstance(value, int):
                found[key] = value
    return found


def _as_helion(artifact: KernelArtifact, log: LaunchLog, source_path: Path) -> KernelArtifact:
    """A Triton artifact of generated code as Helion's: its block sizes, its TTGIR on the candidate's lines."""
    launch = log.first.get(artifact.name)
    constexprs = {**(_block_constants(launch) if launch is not None else {}), **artifact.constexprs}
    asm = dict(artifact.asm)
    fn = getattr(getattr(launch, "kernel", None), "fn", None)
    generated = getattr(getattr(fn, "__code__", None), "co_filename", None)
    if "ttgir" in asm and generated:
        asm["ttgir"] = helion_facts.candidate_locations(asm["ttgir"], Path(generated), source_path)
    return artifact.model_copy(update={"dsl": "helion", "constexprs": constexprs, "asm": asm})


def _trim(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and "site-packages" not in ln]
    return "\n".join(lines[-25:])[:3000]


class _helion_compiles:
    """Around Helion's front end and code generation: a compiler section, with the torch-function
    modes of the caller (the gate's op recorder) set aside. Helion traces the kernel's body with
    fake tensors; a mode that reads them (``data_ptr``) breaks the trace, and one that records
    torch calls would take the traced ``torch.exp`` for library work done at run time."""

    def __enter__(self):
        import torch

        self._section = compiler_section()
        self._section.__enter__()
        self._modes = []
        while torch._C._len_torch_function_stack() > 0:
            self._modes.append(torch._C._pop_torch_function_stack())
        return self

    def __exit__(self, *exc) -> None:
        import torch

        for mode in reversed(self._modes):
            torch._C._push_on_torch_function_stack(mode)
        self._section.__exit__(*exc)


def _hook_binding() -> None:
    """Helion's front end (type propagation, device IR) runs as a compiler: it imports parts of
    Helion, torch and Triton on first use, which set attributes (``namedtuple`` defaults) under the
    candidate's call, and the guard would take them for the candidate's own."""
    from helion.runtime.kernel import BoundKernel

    original = getattr(BoundKernel.__init__, "__wrapped__", BoundKernel.__init__)

    def __init__(self, *args, **kwargs):
        with _helion_compiles():
            original(self, *args, **kwargs)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    BoundKernel.__init__ = __init__


def _hook_config_choice(log: LaunchLog, interpret: bool, ran: dict[str, dict[str, str]]) -> None:
    """Decide each bound kernel's config before Helion would autotune, and say which one ran."""
    from helion.runtime.kernel import BoundKernel

    original = getattr(BoundKernel.ensure_config_exists, "__wrapped__", BoundKernel.ensure_config_exists)

    def ensure_config_exists(self, args):
        if getattr(self, "_config", None) is not None:
            return original(self, args)
        name = _kernel_name(self)
        configs = list(getattr(self.kernel, "configs", None) or [])
        began = time.perf_counter()
        with _helion_compiles():  # Helion's code generation; torch's code cache writes the module
            if len(configs) == 1:
                how = "the config given in the source"
                self.set_config(configs[0])
            elif not configs:
                how = ("Helion's default config: the source gives none, and the gate does not run Helion's "
                       "autotuner (autotune_effort='none'); write config=helion.Config(...) to choose one")
                self.set_config(self.config_spec.default_config())
            elif interpret:
                how = (f"the first of the source's {len(configs)} configs: without a GPU nothing can be timed, "
                       "so the others were not checked")
                self.set_config(configs[0])
            else:
                how = f"chosen by Helion's autotuner among the source's {len(configs)} configs"
                log.tuning += 1
                try:
                    original(self, args)
                finally:
                    log.tuning -= 1
        config = getattr(self, "_config", None)
        backend = getattr(getattr(self, "settings", None), "backend", "triton")
        generated = None
        try:
            generated = self._cache_path_map.get(config)
        except Exception:
            pass
        ran[name] = {"config": config_summary(config), "how": how, "generated": str(generated or "")}
        note = f"Helion kernel {name} ran {config_summary(config)}: {how}"
        if backend != "triton":
            note += f"; its backend is {backend!r}, and only Helion's Triton backend is screened"
        if note not in log.notes:  # each shape binds again, usually to the same config
            log.notes.append(note)
        log.first_call_seconds[f"helion:{name}"] = time.perf_counter() - began

    ensure_config_exists.__wrapped__ = original  # type: ignore[attr-defined]
    BoundKernel.ensure_config_exists = ensure_config_exists


PLUGIN = HelionPlugin()
