"""The optional Nsight Compute pass: ncu's CSV, a missing or failing ncu, and the verdict's evidence.

A fake ``ncu`` on PATH stands in for Nsight Compute (absent on the CPU machine): one that runs the
profiled process for real (which fails without a GPU, and the verdict says why), and one that
answers with a canned report. The real tool runs in the GPU test."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from kernelgate import Candidate, Problem, ScreenOptions, Status, ncu, screen
from kernelgate.gate import screen as gate_screen
from kernelgate.worker import Job
from tests.conftest import EXAMPLES
from kernelgate.testing import FakeRunner
from tests.test_gate import BYTES, FAST, LIBRARY, _candidate, _problem, _timed

# The shape of ncu's --csv output for two kernels (its "raw details" rows: one per kernel and metric).
CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "_layernorm_fwd": 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","_layernorm_fwd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","67,141,632"
"0","4242","python3","127.0.0.1","_layernorm_fwd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","67,108,864"
"0","4242","python3","127.0.0.1","_layernorm_fwd","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","41,216"
"1","4242","python3","127.0.0.1","_combine","1","7","(128, 1, 1)","(32, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Kbyte","16.38"
"1","4242","python3","127.0.0.1","_combine","1","7","(128, 1, 1)","(32, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","0"
'''


def test_csv_gives_counters_per_kernel_in_launch_order():
    first, second = ncu.parse_csv(CSV)
    assert first.name == "_layernorm_fwd" and first.dram_bytes_read == 67_141_632
    assert first.dram_bytes_written == 67_108_864 and first.duration_ns == 41_216
    assert second.name == "_combine" and second.dram_bytes_read == pytest.approx(16_380) and second.duration_ns is None
    assert ncu.parse_csv("==PROF== No kernels were profiled.\n") == []


def test_command_profiles_only_the_marked_call_and_leaves_the_clocks_alone(tmp_path):
    cmd = ncu.ncu_command("/x/ncu", tmp_path / "r.json", tmp_path / "a.json", tmp_path / "n.csv")
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{ncu.RANGE}/"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.METRICS)
    assert cmd[-5:] == [sys.executable, "-m", "kernelgate.ncu", str(tmp_path / "r.json"), str(tmp_path / "a.json")]


def _fake_ncu(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir()
    path = bin_dir / "ncu"
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


# Runs what follows the ncu options (the profiled process), as ncu would, and writes no report.
_PASS_THROUGH = 'while [ "$1" != "' + sys.executable + '" ]; do shift; done\nexec "$@"\n'
# Answers as if the profiled call went well, with the CSV above as its report.
_CANNED = ('report=""; prev=""; for a in "$@"; do [ "$prev" = "--log-file" ] && report="$a"; prev="$a"; done\n'
           'answer="${@: -1}"\necho \'{"ok": true}\' > "$answer"\ncat > "$report" <<\'CSV\'\n' + CSV + 'CSV\n')


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    def install(body: str) -> None:
        _fake_ncu(tmp_path / "bin", body)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return install


def test_without_ncu_the_verdict_says_the_pass_was_skipped(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    v = gate_screen(_candidate(), _problem(), runner=FakeRunner(_timed(FAST, LIBRARY)), options=ScreenOptions(ncu=True))
    assert v.status is Status.accept and v.ncu is None and v.metrics.dram_bytes is None
    assert any("ncu pass skipped" in n and "not installed" in n for n in v.notes)


def test_canned_report_becomes_dram_bytes_and_evidence(fake_path):
    fake_path(_CANNED)
    v = gate_screen(_candidate(), _problem(), runner=FakeRunner(_timed(FAST, LIBRARY)), options=ScreenOptions(ncu=True))
    assert v.status is Status.accept  # evidence only: the status does not change
    assert v.ncu is not None and [k.name for k in v.ncu.kernels] == ["_layernorm_fwd", "_combine"]
    assert v.metrics.dram_bytes == pytest.approx(67_141_632 + 67_108_864 + 16_380)
    (finding,) = [f for f in v.findings if f.code == "dram_traffic"]
    assert finding.kind == "info" and f"{v.metrics.dram_bytes / BYTES:.2f}x the compulsory" in finding.evidence
    assert "ncu" in v.seconds


def test_no_pass_for_a_screen_that_did_not_time(fake_path):
    fake_path(_CANNED)
    v = screen(Candidate(source=(EXAMPLES / "triton" / "rowsum_good.py").read_text()),
               Problem(kind="kernelbench_file", name=str(EXAMPLES / "problems" / "rowsum.py"),
                       shape={"ROWS": 4, "COLS": 256}), options=ScreenOptions(ncu=True))
    assert v.status is Status.untimed and v.ncu is None
    assert any(n == "ncu pass skipped: nothing was timed" for n in v.notes)


def test_profiled_process_that_fails_is_a_note_not_an_error(fake_path):
    # the fake runs the real profiled process, which loads the candidate and fails without a GPU
    fake_path(_PASS_THROUGH)
    job = Job(candidate=Candidate(source=(EXAMPLES / "triton" / "rowsum_good.py").read_text(), dsl="triton"),
              problem=Problem(kind="kernelbench_file", name=str(EXAMPLES / "problems" / "rowsum.py"),
                              shape={"ROWS": 4, "COLS": 256}))
    report, why = ncu.profile(job, timeout_s=120)
    assert report is None and why.startswith("ncu pass gave no result: ")
    assert "RuntimeError" in why, why  # from the profiled process's own answer: no GPU driver here


def test_screen_many_refuses_the_pass():
    from kernelgate.many import screen_many

    with pytest.raises(ValueError, match="ncu is for screen"):
        list(screen_many([(_candidate(), _problem())], options=ScreenOptions(ncu=True)))
