"""Shared test set-up: GPU tests skip without a GPU (saying so), and no test leaks environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = ROOT / "examples"


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run `pytest -m gpu` on the device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch, tmp_path):
    """TRITON_INTERPRET or CUDA_VISIBLE_DEVICES set by one test must not reach the next."""
    saved = dict(os.environ)
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path / "kgcache"))
    yield
    os.environ.clear()
    os.environ.update(saved)


def fixture_source(name: str) -> str:
    return (FIXTURES / name).read_text()
