"""kernelgate.__all__ lists exactly the public names kernelgate/__init__.py defines, and each imports."""

from __future__ import annotations

import __future__ as future_module
import ast
import importlib
import types
from pathlib import Path

import pytest

import kernelgate

INIT = Path(kernelgate.__file__)


def _defined_in_init() -> set[str]:
    """Names bound at module level in kernelgate/__init__.py, read from its source."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_all_has_no_duplicates():
    assert len(kernelgate.__all__) == len(set(kernelgate.__all__))


def test_all_equals_public_names_defined_in_init_source():
    defined = _public(_defined_in_init())
    defined = {n for n in defined if not isinstance(getattr(kernelgate, n, None), types.ModuleType)}
    assert _public(kernelgate.__all__) == defined


def test_all_equals_public_non_module_attributes():
    attrs = {
        name for name, value in vars(kernelgate).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)          # submodules imported on the way
        and not isinstance(value, future_module._Feature)    # `from __future__ import annotations`
    }
    assert _public(kernelgate.__all__) == attrs


def test_only_dunder_exported_is_the_version():
    assert {n for n in kernelgate.__all__ if n.startswith("_")} == {"__version__"}
    assert isinstance(kernelgate.__version__, str) and kernelgate.__version__


@pytest.mark.parametrize("name", kernelgate.__all__)
def test_every_exported_name_is_importable(name):
    module = importlib.import_module("kernelgate")
    assert hasattr(module, name)
    namespace: dict = {}
    exec(f"from kernelgate import {name}", namespace)
    assert namespace[name] is getattr(module, name)


def test_star_import_gives_exactly_all():
    namespace: dict = {}
    exec("from kernelgate import *", namespace)
    namespace.pop("__builtins__", None)
    assert set(namespace) == set(kernelgate.__all__)


def test_exports_are_the_library_objects():
    from kernelgate.gate import screen
    from kernelgate.models import Verdict
    from kernelgate.policy import DEFAULT_POLICY

    assert kernelgate.screen is screen
    assert kernelgate.Verdict is Verdict
    assert kernelgate.DEFAULT_POLICY is DEFAULT_POLICY
    assert issubclass(kernelgate.NoGPUError, kernelgate.KernelgateError)
