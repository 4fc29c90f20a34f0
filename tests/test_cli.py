"""The command line: readable and JSON output, exit codes, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys

from kernelgate.cli import main
from tests.conftest import FIXTURES


def _run(*args):
    return subprocess.run([sys.executable, "-m", "kernelgate.cli", *args], capture_output=True, text=True, timeout=300)


def test_screen_json_is_only_the_verdict():
    proc = _run("screen", str(FIXTURES / "rowsum_good.py"), "--problem", "rowsum", "--shape", "rows=8",
                "--shape", "cols=128", "--entry", "kernel", "--json")
    verdict = json.loads(proc.stdout)
    assert verdict["status"] in ("untimed", "repair")
    assert proc.returncode == {"untimed": 13, "repair": 10}[verdict["status"]]


def test_reject_exit_code_and_readable_output():
    proc = _run("screen", str(FIXTURES / "wrong_values.py"), "--problem", "rowsum", "--shape", "rows=8",
                "--shape", "cols=128", "--entry", "kernel")
    assert proc.returncode == 12
    assert "numerics_mismatch" in proc.stdout and "feedback" in proc.stdout


def test_usage_errors_exit_2(capsys):
    assert main(["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "no_such_op"]) == 2
    assert main(["screen", "missing.py", "--problem", "rowsum"]) == 2
    assert main(["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "rowsum", "--shape", "rows=x"]) == 2
    assert main(["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "rowsum", "--dsl", "cobol"]) == 2
    try:
        main(["screen"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "error" in capsys.readouterr().err


def test_ops_lists_the_catalogue(capsys):
    assert main(["ops", "--json"]) == 0
    names = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert {"layernorm", "softmax", "rowsum", "matmul"} <= names


def test_calibrate_without_gpu_says_so(capsys):
    assert main(["calibrate"]) == 2
    assert "no GPU" in capsys.readouterr().err
