"""Compiled-code cache: screening the same candidate again does not compile it again.

Entries are keyed by a hash of everything that decides the compiler's output: the source, the
compiler flags, the target (device and architecture) and the versions of the compilers and
packages involved. What is cached, by whom:

- the static artifacts that ``kernelgate.dsl._nvcc`` gets from nvcc (PTX, SASS, registers,
  spills) for TileLang and CUDA candidates, as JSON entries;
- build directories of CUDA extensions (``load_inline``), one per key, where torch's own build
  keeps the shared library and skips the rebuild when nothing changed;
- Triton's and TileLang's own caches, pointed under the same root (``TRITON_CACHE_DIR``,
  ``TILELANG_CACHE_DIR``), so one directory holds all compiled code and one setting moves it.

The root is ``$KERNELGATE_CACHE_DIR/compile`` or ``~/.cache/kernelgate/compile``; the worker
activates it from ``ScreenOptions.compile_cache_dir`` before any candidate code runs, because the
candidate's environment is not to be trusted for it. A candidate can write into this directory
like any other: keys bind entries to the exact source, but a shared cache is only as trusted as
the candidates that filled it (turn it off with ``ScreenOptions.compile_cache=False``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["CompileCache", "default_root", "activate", "active"]

_ENTRY_VERSION = 1
"""Bumped when the layout of an entry changes: old entries are ignored, not misread."""


def default_root() -> Path:
    env = os.environ.get("KERNELGATE_CACHE_DIR")
    base = Path(env).expanduser() if env else Path.home() / ".cache" / "kernelgate"
    return base / "compile"


class CompileCache:
    """JSON entries and build directories under one root, keyed by content hashes."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(**parts: Any) -> str:
        """The hash of every part that decides the compiled output (order does not matter)."""
        blob = json.dumps({"v": _ENTRY_VERSION, **parts}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            value = json.loads(self._entry_path(key).read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict) -> None:
        path = self._entry_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value))
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old entry or the new one

    def directory(self, kind: str, key: str) -> Path:
        """A build directory owned by one key (e.g. a CUDA extension's)."""
        path = self.root / kind / key[:32]
        path.mkdir(parents=True, exist_ok=True)
        return path


_ACTIVE: CompileCache | None = None
_CACHE_ENV = ("TRITON_CACHE_DIR", "TILELANG_CACHE_DIR")
_ENV_BEFORE: dict[str, str | None] | None = None
"""The compilers' cache variables as they were before the first activation, restored by activate(None)."""


def activate(root: Path | str | None) -> CompileCache | None:
    """Use ``root`` for this process's compiled code (None: no cache; compilers use private dirs)."""
    global _ACTIVE, _ENV_BEFORE
    if root is None:
        _ACTIVE = None
        if _ENV_BEFORE is not None:
            for name, value in _ENV_BEFORE.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            _ENV_BEFORE = None
        return None
    if _ENV_BEFORE is None:
        _ENV_BEFORE = {name: os.environ.get(name) for name in _CACHE_ENV}
    _ACTIVE = CompileCache(root)
    _ACTIVE.root.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(_ACTIVE.root / "triton")
    os.environ["TILELANG_CACHE_DIR"] = str(_ACTIVE.root / "tilelang")
    return _ACTIVE


def active() -> CompileCache | None:
    """The cache activated in this process, if any."""
    return _ACTIVE
