"""The command line: readable and JSON output, exit codes, usage errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from kernelgate.cli import main
from tests.conftest import EXAMPLES, FIXTURES


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


def test_version(capsys):
    from kernelgate import __version__

    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"kernelgate {__version__}"


def test_help_lists_the_exit_codes(capsys):
    try:
        main(["--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    for line in ("0   accept", "10  repair", "11  structural", "12  reject", "13  untimed", "2   usage error",
                 "3   a fault of the gate itself"):
        assert line in out


def test_non_positive_shape_is_a_usage_error(capsys):
    for size in ("0", "-4"):
        code = main(["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "rowsum", "--shape", f"rows={size}"])
        assert code == 2
        assert f"--shape rows={int(size)}: a size must be at least 1" in capsys.readouterr().err
    problem = str(EXAMPLES / "problems" / "rowsum.py")
    assert main(["screen", str(FIXTURES / "rowsum_good.py"), "--problem", problem, "--shape", "ROWS=0"]) == 2
    assert "a size must be at least 1" in capsys.readouterr().err


def test_json_usage_errors_are_json_on_stdout():
    # argparse's own error (a missing required option) and kernelgate's (an unknown op), both under --json
    for args in (["screen", str(FIXTURES / "rowsum_good.py"), "--json"],
                 ["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "no_such_op", "--json"],
                 ["screen", str(FIXTURES / "rowsum_good.py"), "--problem", "rowsum", "--shape", "rows=0", "--json"],
                 ["ops", "--json", "--bogus"]):
        proc = _run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        error = json.loads(proc.stdout)
        assert error["exit_code"] == 2 and isinstance(error["error"], str) and error["error"], args
        assert "error" in proc.stderr
    proc = _run("screen", str(FIXTURES / "rowsum_good.py"))  # without --json: nothing on stdout
    assert proc.returncode == 2 and proc.stdout == "" and "--problem" in proc.stderr


def test_batch_twice_does_not_log_the_same_verdicts_again(tmp_path, capsys):
    from kernelgate.store import VerdictLog

    demo = EXAMPLES / "kernelbench"
    runs = tmp_path / "runs" / "twice"
    runs.mkdir(parents=True)
    name = "level_1_problem_2_sample_0_kernel.py"
    shutil.copy(demo / "runs" / "triton_demo" / name, runs / name)
    logfile, evaljson = tmp_path / "kg.sqlite", tmp_path / "eval.json"
    args = ["batch", "--kernelbench", str(demo / "KernelBench"), "--level", "1", "--runs", str(runs),
            "--log", str(logfile), "--eval-json", str(evaljson)]
    assert main(args) == 0
    assert "batch twice: 1 verdicts (1 untimed), 0 skipped; log" in capsys.readouterr().out
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "batch twice: 0 verdicts (nothing screened), 0 skipped, 1 already in the log" in captured.out
    assert f"{name}: already in the log" in captured.err
    with VerdictLog(logfile) as log:
        assert len(log) == 1
    assert [s["sample_id"] for s in json.loads(evaljson.read_text())["2"]] == [0]  # still reported
    assert main([*args, "--rescreen"]) == 0
    assert "batch twice: 1 verdicts (1 untimed), 0 skipped; log" in capsys.readouterr().out
    with VerdictLog(logfile) as log:
        assert len(log) == 2
