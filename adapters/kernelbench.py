"""KernelBench problem files: ``Model``, ``get_inputs()``, ``get_init_inputs()`` at module level.

Shapes in such files are module globals (``batch_size = 16``); ``load_problem_module`` can set
them before anything reads them, which is how a smaller shape is screened without a GPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from kernelgate.errors import ProblemError

__all__ = ["load_problem_module", "shape_globals"]

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")


def shape_globals(module: ModuleType) -> dict[str, int]:
    """The module's integer globals: the shape parameters of a KernelBench file."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)}


def load_problem_module(path: str | Path, overrides: dict[str, int] | None = None) -> ModuleType:
    """Import a KernelBench-style file and apply shape overrides to its globals."""
    path = Path(path)
    if not path.is_file():
        raise ProblemError(f"problem file not found: {path}")
    name = f"kernelgate_problem_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ProblemError(f"problem file {path} failed to import: {type(exc).__name__}: {exc}") from exc
    missing = [attr for attr in _REQUIRED if not hasattr(module, attr)]
    if missing:
        raise ProblemError(f"problem file {path} lacks {', '.join(missing)}")
    known = shape_globals(module)
    unknown = set(overrides or {}) - set(known)
    if unknown:
        raise ProblemError(f"problem file {path} has no integer global {', '.join(sorted(unknown))}; "
                           f"it has {', '.join(sorted(known)) or 'none'}")
    for key, value in (overrides or {}).items():
        setattr(module, key, value)
    return module
