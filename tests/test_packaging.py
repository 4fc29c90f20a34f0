"""pyproject.toml: every package folder is installed (a folder missing from the list installs
nowhere but an editable checkout, and ``pip install .`` then fails at import)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapped = {name: ROOT / path for name, path in config.get("package-dir", {}).items()}
    found = set()
    for name in ("kernelgate",):
        base = ROOT / name
        for init in base.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            found.add(".".join((name,) + init.parent.relative_to(base).parts))
    for name, folder in mapped.items():  # folders installed under another name (adapters, reference_ops)
        assert (folder / "__init__.py").exists(), f"{name} maps to {folder}, which is not a package"
    assert found <= listed, f"package folders not in pyproject.toml's packages: {sorted(found - listed)}"
