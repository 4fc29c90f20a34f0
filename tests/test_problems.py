"""A new user's first hour: the Problem constructors as they call them (relative paths, shape
overrides, bad sizes), the optional extras, and registers read by whatever ptxas can read the PTX."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from kernelgate import Candidate, Problem, screen
from tests.conftest import EXAMPLES


def test_file_resolves_a_relative_path_against_the_callers_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(EXAMPLES)
    problem = Problem.file("problems/rowsum.py", shape={"ROWS": 8, "COLS": 128})
    assert Path(problem.name).is_absolute()
    assert Path(problem.name) == (EXAMPLES / "problems" / "rowsum.py").resolve()
    assert problem.shape == {"ROWS": 8, "COLS": 128}
    # The path was fixed at construction: moving elsewhere afterwards (as the worker does) still finds it.
    monkeypatch.chdir(tmp_path)
    source = (EXAMPLES / "triton" / "rowsum_good.py").read_text()
    verdict = screen(Candidate(source=source, name="rowsum_good.py"), problem)
    assert verdict.reason is None or verdict.reason.value != "problem_error", verdict.failure
    assert verdict.status.value in ("untimed", "repair", "accept", "structural"), (verdict.status, verdict.failure)
    assert verdict.numerics is not None and verdict.numerics.checked


def test_file_accepts_a_path_object(monkeypatch):
    monkeypatch.chdir(EXAMPLES / "problems")
    assert Problem.file(Path("rowsum.py")).name == os.path.join(str(EXAMPLES / "problems"), "rowsum.py")


@pytest.mark.parametrize("size", [0, -3])
def test_non_positive_sizes_are_refused_at_construction(size):
    with pytest.raises(ValidationError, match=rf"shape sizes must be integers >= 1, got batch_size={size}"):
        Problem.file("x.py", shape={"batch_size": size})
    with pytest.raises(ValidationError, match=rf"got rows={size}"):
        Problem.op("rowsum", rows=size)
    with pytest.raises(ValueError, match="shape sizes"):  # ValidationError is a ValueError
        Problem(kind="reference_op", name="rowsum", shape={"rows": 8, "cols": size})


def test_positive_sizes_pass():
    assert Problem.op("rowsum", rows=1, cols=128).shape == {"rows": 1, "cols": 128}


def test_import_and_extract_code_without_the_optional_extras():
    # httpx, tenacity (extra "openai") and nvidia-ml-py (extra "gpu") blocked: kernelgate still imports,
    # and ChatClient says which extra it needs.
    code = """
import sys
for name in ("httpx", "tenacity", "pynvml"):
    sys.modules[name] = None
import kernelgate
from kernelgate import hardware
from kernelgate.adapters.openai_compat import ChatClient, extract_code
assert extract_code("```python" + chr(10) + "x = 1" + chr(10) + "```").strip() == "x = 1"
assert hardware._nvml_fields(None, 0) == {}
try:
    ChatClient("http://127.0.0.1:9/v1", model="m")
except ModuleNotFoundError as exc:
    print("refused:", exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused: ChatClient needs httpx and tenacity" in proc.stdout
    assert "pip install 'kernelgate[openai]'" in proc.stdout


def _fake_ptxas(folder: Path, name: str, release: str, answer: str, code: int) -> str:
    path = folder / name
    path.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release {release}, V{release}.0"; exit 0; fi
echo "{answer}" >&2
exit {code}
""")
    path.chmod(0o755)
    return str(path)


REFUSAL = "ptxas fatal   : Unsupported .version 9.4; current version is '8.7'"
PTX = "//\n.version 9.4\n.target sm_90a\n.address_size 64\n"


def test_ptxas_falls_back_to_one_that_reads_the_ptx(monkeypatch, tmp_path):
    from kernelgate.dsl import triton as kt

    old = _fake_ptxas(tmp_path, "old", "12.8", REFUSAL, 255)
    new = _fake_ptxas(tmp_path, "new", "13.4", "ptxas info    : Used 40 registers, 8 bytes spill stores, "
                      "4 bytes spill loads", 0)
    monkeypatch.setattr(kt, "_ptxas_candidates", lambda arch: [("old one", old, (12, 8)), ("new one", new, (13, 4))])
    assert kt._ptxas_resources(PTX, 90) == (40, 12, None)


def test_no_ptxas_reads_the_ptx_and_the_verdict_notes_why(monkeypatch, tmp_path):
    from kernelgate.dsl import Launch
    from kernelgate.dsl import triton as kt

    old = _fake_ptxas(tmp_path, "old", "12.8", REFUSAL, 255)
    monkeypatch.setattr(kt, "_ptxas_candidates", lambda arch: [("old one", old, (12, 8))])
    compiled = SimpleNamespace(metadata=SimpleNamespace(num_warps=4, num_stages=3, shared=0), asm={"ptx": PTX})
    notes: list[str] = []
    kernel = kt._describe("k", compiled, "cuda:90", 1, Launch(kernel=None, args=(), kwargs={}, grid=[1]),
                          gpu=False, notes=notes)
    assert kernel.registers is None and kernel.spill_bytes is None
    assert len(notes) == 1
    assert "Triton kernel k: registers and spills not read: no ptxas could assemble the PTX .version 9.4" in notes[0]
    assert "old one 12.8 (exit 255)" in notes[0] and "Unsupported .version 9.4" in notes[0]
    monkeypatch.setattr(kt, "_ptxas_candidates", lambda arch: [])
    assert "no ptxas here" in kt._ptxas_resources(PTX, 90)[2]


def test_ptxas_candidates_start_with_tritons_own():
    from kernelgate.dsl import triton as kt

    found = kt._ptxas_candidates(90)
    if not found:
        pytest.skip("no ptxas on this machine")
    own = kt._tritons_ptxas(90)
    if own and os.path.isfile(own):
        assert found[0][1] == own
    assert len({release for _, _, release in found}) == len(found)  # one per release


def test_randomize_state_in_slices_keeps_scale_and_positive_variances(monkeypatch):
    import torch

    import kernelgate.problems as problems

    monkeypatch.setattr(problems, "STATE_CHUNK_ELEMENTS", 100)  # many slices per parameter
    linear, norm = torch.nn.Linear(50, 40), torch.nn.BatchNorm1d(300)
    before = linear.weight.detach().clone()
    problems.randomize_state(linear, torch.Generator().manual_seed(0))
    problems.randomize_state(norm, torch.Generator().manual_seed(0))
    assert not torch.any(linear.weight == before)
    assert abs(float(linear.weight.std()) / float(before.std()) - 1) < 0.1  # a similar scale
    assert float(norm.running_var.min()) >= 0.5 and float(norm.weight.std()) > 0.3  # ones get spread too
    strided = torch.nn.Linear(8, 6)
    strided.weight = torch.nn.Parameter(torch.randn(8, 6).t())  # not contiguous: written back whole
    kept = strided.weight.detach().clone()
    problems.randomize_state(strided, torch.Generator().manual_seed(0))
    assert not torch.any(strided.weight == kept)
