"""Fuzzing the loaders and the command line with malformed sources and arguments (hypothesis).

What must hold for any input: the gate answers with a verdict or a clear ``KernelgateError`` /
usage exit, never a traceback of its own. Sources are random text and mutations of real
fixtures; anything that would reach a worker is answered by a recording runner, so the fuzzing
stays in-process and fast while ``screen`` runs its real static path (parse, integrity rules, DSL
detection, verdict assembly).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelgate import Candidate, Problem, Reason, Status, screen
from kernelgate import integrity
from kernelgate.adapters.kernelbench import read_candidate
from kernelgate.adapters.openai_compat import extract_code
from kernelgate.cli import EXIT_CODES, main
from kernelgate.dsl import detect_dsl
from kernelgate.models import Failure, Measurement
from kernelgate.testing import FakeRunner
from tests.conftest import FIXTURES

PROBLEM = Problem.op("rowsum", rows=8, cols=128)
SEEDS = [p.read_text() for p in sorted(FIXTURES.glob("*.py")) + sorted((FIXTURES / "exploits").glob("*.py"))]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _recording_runner() -> FakeRunner:
    """Stands in for the worker pool: records the job, answers with a scripted crash."""
    return FakeRunner(Measurement(failure=Failure(reason=Reason.crash, stage="load", message="fake: the fuzz runner")))


@st.composite
def mutated_sources(draw) -> str:
    """A real fixture with a slice deleted, duplicated or replaced by random text."""
    source = draw(st.sampled_from(SEEDS))
    if not source:
        return source
    start = draw(st.integers(0, len(source) - 1))
    end = draw(st.integers(start, min(len(source), start + 80)))
    action = draw(st.sampled_from(["delete", "duplicate", "replace", "truncate"]))
    if action == "delete":
        return source[:start] + source[end:]
    if action == "duplicate":
        return source[:end] + source[start:end] + source[end:]
    if action == "truncate":
        return source[:start]
    return source[:start] + draw(st.text(max_size=40)) + source[end:]


SOURCES = st.one_of(st.text(max_size=400), mutated_sources(),
                    st.binary(max_size=200).map(lambda b: b.decode("latin-1")))


@FUZZ
@given(source=SOURCES)
def test_screen_answers_every_source_with_a_verdict(source):
    runner = _recording_runner()
    verdict = screen(Candidate(source=source, entry="kernel"), PROBLEM, runner=runner)
    assert verdict.status in set(Status)
    assert verdict.model_dump_json()  # always serializable
    if verdict.status is Status.reject:
        assert verdict.reason is not None and verdict.failure.message
    try:
        compile(source, "candidate.py", "exec")
        parses = True
    except (SyntaxError, ValueError):
        parses = False
    if not parses:
        assert verdict.reason is Reason.syntax_error and not runner.jobs  # no process for an unparsable source


@FUZZ
@given(source=SOURCES)
def test_static_rules_and_detection_never_raise(source):
    hits = integrity.scan(source)
    for hit in hits:
        assert hit.line >= 0 and hit.rule and hit.message
    integrity.static_failure(hits)
    assert detect_dsl(source) in (None, "triton", "tilelang", "cuda")


@FUZZ
@given(reply=st.text(max_size=300), fence=st.sampled_from(["```python\n", "```\n", "```cuda\n", "", "```py"]))
def test_code_extraction_takes_any_reply(reply, fence):
    code = extract_code(fence + reply)
    assert isinstance(code, str) and code.endswith("\n")


@FUZZ
@given(source=SOURCES)
def test_kernelbench_candidate_reader_takes_any_text(source):
    if "\n" not in source and source.endswith(".py"):
        source += "\n"  # a one-line string ending in .py is read as a path, by design
    candidate = read_candidate(source, backend="triton")
    assert candidate.entry == "ModelNew" and candidate.dsl == "triton"


_TOKENS = ["screen", "ops", "calibrate", "batch", "report", "--json", "--problem", "--shape", "--dtype", "--dsl",
           "--entry", "--reps", "rowsum", "no_such_op", "rows=8", "rows=x", "=3", "cols=", "float32", "int8",
           "triton", "cobol", "-1", "0", "missing.py", "/nonexistent/dir/p.py", "--", "-h", "",
           str(FIXTURES / "syntax_error.py"), str(FIXTURES), "\x00", "ü.py"]


@FUZZ
@given(argv=st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=12)), max_size=8))
def test_cli_never_raises_on_malformed_arguments(argv, capsys):
    if "batch" in argv or "report" in argv:  # these write files; fuzzed separately below
        argv = [a for a in argv if a not in ("batch", "report")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    capsys.readouterr()
    assert code in {2, 3} | set(EXIT_CODES.values()), code
    assert code != 3, "a malformed argument was a gate fault"


@pytest.mark.parametrize("argv", [
    ["batch", "--kernelbench", "/nonexistent", "--level", "1", "--runs", "/nonexistent"],
    ["batch", "--kernelbench", str(FIXTURES), "--level", "x", "--runs", str(FIXTURES)],
    ["report", "--log", "/nonexistent/log.sqlite", "--out", "OUT"],
])
def test_cli_batch_and_report_refuse_bad_paths(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2, capsys.readouterr()
    assert not (tmp_path / "OUT").exists() or not any((tmp_path / "OUT").iterdir())


def test_fuzz_seeds_are_real_fixtures():
    assert len(SEEDS) >= 30 and any("triton.jit" in s for s in SEEDS)
