"""The parent's side: it supervises, receives data, and never imports torch."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import FIXTURES

_SCREEN_IN_A_FRESH_PARENT = """
import sys
from kernelgate import Candidate, Problem, screen
v = screen(Candidate(source=open(sys.argv[1]).read(), entry="kernel"), Problem.op("rowsum", rows=8, cols=128))
print(v.status.value, "torch" in sys.modules)
"""


def test_the_parent_screens_without_importing_torch():
    done = subprocess.run([sys.executable, "-c", _SCREEN_IN_A_FRESH_PARENT, str(FIXTURES / "rowsum_good.py")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    status, torch_loaded = done.stdout.split()[-2:]
    assert status in ("untimed", "repair", "accept")
    assert torch_loaded == "False"
