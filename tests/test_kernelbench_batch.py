"""KernelBench: checkout layout, candidates and backends, the eval_kernel_against_ref drop-in, and
the batch over a runs folder through the CLI (verdicts, log, KernelBench's eval_results.json, report)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from kernelgate.adapters import kernelbench as kb
from kernelgate.adapters.batch import find_generations
from kernelgate.errors import PluginError, ProblemError
from kernelgate.models import Reason
from kernelgate.store import VerdictLog
from tests.canned import scaled, verdict
from tests.conftest import EXAMPLES

DEMO = EXAMPLES / "kernelbench"


@pytest.fixture
def checkout(tmp_path):
    """A synthetic KernelBench checkout and runs folder, laid out as the real ones."""
    root = tmp_path / "KernelBench-main"
    shutil.copytree(DEMO / "KernelBench", root / "KernelBench")
    (root / "KernelBench" / "level2").mkdir()
    (root / "KernelBench" / "level1" / "README.md").write_text("not a problem")
    runs = tmp_path / "runs" / "my_run"
    runs.mkdir(parents=True)
    for name in ("level_1_problem_1_sample_0_kernel.py", "level_1_problem_1_sample_1_kernel.py",
                 "level_1_problem_2_sample_0_kernel.py", "level_1_problem_1_sample_0_prompt.txt"):
        shutil.copy(DEMO / "runs" / "triton_demo" / name, runs / name)
    shutil.copy(DEMO / "runs" / "triton_demo" / "level_1_problem_1_sample_0_kernel.py",
                runs / "level_1_problem_9_sample_0_kernel.py")  # no problem 9 in the checkout
    shutil.copy(DEMO / "runs" / "triton_demo" / "level_1_problem_1_sample_0_kernel.py",
                runs / "level_2_problem_1_sample_0_kernel.py")  # another level: not in a level-1 batch
    return root, runs


def test_checkout_layout(checkout):
    root, runs = checkout
    assert kb.dataset_dir(root) == root / "KernelBench" == kb.dataset_dir(root / "KernelBench")
    files = kb.problem_files(root, 1)
    assert sorted(files) == [1, 2, 3] and files[2].name == "2_Scale_columns.py"
    p = kb.problem(root, 2, level=1, shape={"dim": 64})
    assert p.kind == "kernelbench_file" and p.name == str(files[2].resolve()) and p.shape == {"dim": 64}
    assert kb.problem(files[3]).name == str(files[3].resolve())
    with pytest.raises(ProblemError, match="no problem 7"):
        kb.problem(root, 7, level=1)
    with pytest.raises(ProblemError, match="no level 4"):
        kb.problem_files(root, 4)
    with pytest.raises(ProblemError, match="not a KernelBench checkout"):
        kb.dataset_dir(runs)
    gens = find_generations(runs, level=1)
    assert [(g.problem_id, g.sample_id) for g in gens] == [(1, 0), (1, 1), (2, 0), (9, 0)]
    assert len(find_generations(runs)) == 5


def test_backends_map_to_plugins_and_candidates_read(checkout):
    _, runs = checkout
    assert [kb.dsl_for_backend(b) for b in ("cuda", "Triton", "tilelang", None)] == ["cuda", "triton", "tilelang", None]
    with pytest.raises(PluginError, match="supported: cuda, tilelang, triton"):
        kb.dsl_for_backend("thunderkittens")
    path = runs / "level_1_problem_2_sample_0_kernel.py"
    c = kb.read_candidate(path, backend="triton", metadata={"sample": 0})
    assert c.name == path.name and c.dsl == "triton" and c.entry == "ModelNew" and c.metadata == {"sample": 0}
    assert kb.read_candidate(path.read_text()).source == path.read_text()
    from kernelgate.dsl import detect_dsl

    assert detect_dsl(c.source) == "triton"  # no backend given: the gate detects it from the source


def test_drop_in_rejects_a_wrong_kernel_with_kernelbench_fields(checkout):
    root, runs = checkout
    ref = (root / "KernelBench" / "level1" / "1_Sum_over_last_dim.py").read_text()
    wrong = (runs / "level_1_problem_1_sample_1_kernel.py").read_text()
    result = kb.eval_kernel_against_ref(ref, wrong, num_correct_trials=5, backend="triton")
    assert result.compiled is True and result.correctness is False and result.runtime == -1.0
    assert result.verdict.reason is Reason.numerics_mismatch
    assert result.metadata["kernelgate_status"] == "reject" and "tolerance" in result.metadata["correctness_issue"]
    assert result.metadata["correctness_trials"] == "(0 / 1)"  # stops at the first failing trial
    json.dumps(result.model_dump(mode="json"))  # serializable as it is, unlike KernelBench's exception objects
    syntax = kb.eval_kernel_against_ref(ref, "import triton\nclass ModelNew(:\n", backend="triton")
    assert syntax.compiled is False and syntax.metadata["compilation_error_name"] == "syntax_error"


def test_result_fields_of_a_timed_verdict():
    fast = verdict("fast", scaled(0.8))
    r = kb.result_from_verdict(fast)
    samples = fast.timing.candidate.samples_ms
    assert r.compiled and r.correctness and r.runtime == pytest.approx(sum(samples) / len(samples))
    assert r.ref_runtime == pytest.approx(sum(fast.timing.library.samples_ms) / len(samples))
    assert r.runtime_stats["num_trials"] == len(samples) and r.runtime_stats["hardware"] == "NVIDIA H200"
    assert r.metadata["excessive_speedup"] is False
    assert kb.result_from_verdict(fast, excessive_speedup_threshold=1.1).metadata["excessive_speedup"] is True
    assert kb.result_from_verdict(fast, measure_performance=False).runtime == -1.0


def test_cli_batch_then_report(checkout, tmp_path):
    root, runs = checkout
    logfile, evaljson, out = tmp_path / "kg.sqlite", tmp_path / "eval_results.json", tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "kernelgate.cli", "batch", "--kernelbench", str(root), "--level", "1",
                           "--runs", str(runs), "--log", str(logfile), "--eval-json", str(evaljson)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "batch my_run: 3 verdicts (1 reject, 2 untimed), 1 skipped" in proc.stdout
    assert "[4/4] level_1_problem_9_sample_0_kernel.py: skipped" in proc.stderr  # plain progress, one line each
    assert "[2/4] level_1_problem_1_sample_1_kernel.py: reject (numerics_mismatch)" in proc.stderr
    with VerdictLog(logfile) as log:
        entries = log.entries(batch="my_run")
    by_name = {e.verdict.candidate_name: e for e in entries}
    assert {n: e.verdict.status.value for n, e in by_name.items()} == {
        "level_1_problem_1_sample_0_kernel.py": "untimed", "level_1_problem_1_sample_1_kernel.py": "reject",
        "level_1_problem_2_sample_0_kernel.py": "untimed"}
    scale = by_name["level_1_problem_2_sample_0_kernel.py"].verdict
    # ModelNew initializes `scale` to ones: it is right only because the reference's state was copied in
    assert scale.numerics.state_copied is True and scale.numerics.passed
    assert scale.candidate_metadata["kernelbench_problem_id"] == 2
    assert by_name["level_1_problem_1_sample_0_kernel.py"].generator["run"] == "my_run"
    results = json.loads(evaljson.read_text())
    assert sorted(results) == ["1", "2"]
    assert [(s["sample_id"], s["compiled"], s["correctness"]) for s in results["1"]] == [(0, True, True), (1, True, False)]
    assert results["2"][0]["metadata"]["state_dict_copied"] is True

    proc = subprocess.run([sys.executable, "-m", "kernelgate.cli", "report", "--log", str(logfile), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = (out / "my_run.html").read_text()
    assert proc.stdout.strip() == str(out / "my_run.html")
    assert page.count('<tr class="verdict"') == 3 and "Nothing timed in this batch" in page


def test_cli_usage_errors(tmp_path):
    from kernelgate.cli import main

    assert main(["batch", "--kernelbench", str(tmp_path), "--level", "1", "--runs", str(tmp_path)]) == 2
    assert main(["report", "--log", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path)]) == 2
