"""The verdict log: round trip, filters, feedback queries, batches, schema version, one file."""

from __future__ import annotations

import sqlite3

import pytest

from kernelgate.models import Problem, Reason, Status
from kernelgate.store import SCHEMA_VERSION, StoreError, VerdictLog, problem_key
from tests.canned import SOURCE, scaled, verdict


@pytest.fixture(scope="module")
def verdicts():
    return {"fast": verdict("fast", scaled(0.8)), "slow": verdict("slow", scaled(3.0)),
            "wrong": verdict("wrong", None, failure=Reason.numerics_mismatch),
            "crash": verdict("crash", None, failure=Reason.crash)}


def test_round_trip_keeps_every_field(tmp_path, verdicts):
    path = tmp_path / "log.sqlite"
    with VerdictLog(path) as log:
        row = log.add(verdicts["fast"], batch="b1", generator={"model": "m", "round": 1},
                      source=SOURCE.format(tag="fast"))
    with VerdictLog(path) as log:  # reopened: the data is in the file
        (entry,) = log.entries()
    assert entry.id == row and entry.batch == "b1" and entry.generator == {"model": "m", "round": 1}
    assert entry.verdict == verdicts["fast"]
    assert entry.source == SOURCE.format(tag="fast")
    db = sqlite3.connect(path)
    cols = db.execute("SELECT status, lre, lre_low, lre_high, u_candidate, candidate_sha256, dsl FROM verdicts").fetchone()
    m = verdicts["fast"].metrics
    assert cols == ("accept", m.lre, m.lre_low, m.lre_high, m.u_candidate, verdicts["fast"].candidate_sha256, "triton")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.sqlite"]  # one file, no WAL side files


def test_filters_feedback_queries_and_batches(tmp_path, verdicts):
    log = VerdictLog(tmp_path / "log.sqlite")
    for name in ("wrong", "slow", "crash", "fast"):
        log.add(verdicts[name], batch="b1")
    other = verdict("elsewhere", None, failure=Reason.compile_error).model_copy(
        update={"problem": Problem.op("softmax", rows=8, cols=128)})
    log.add(other, batch="b2")
    problem = verdicts["fast"].problem
    assert [v.candidate_name for v in log.verdicts(batch="b1")] == ["wrong", "slow", "crash", "fast"]
    assert [v.candidate_name for v in log.verdicts(problem=problem)] == ["wrong", "slow", "crash", "fast"]
    assert log.last_reject_reasons(problem, k=5) == [("crash", verdicts["crash"].feedback),
                                                     ("numerics_mismatch", verdicts["wrong"].feedback)]
    assert log.last_reject_reasons(problem, k=1) == [("crash", verdicts["crash"].feedback)]
    # feedback of everything not accepted, newest first: crash, slow (a repair), wrong
    assert log.last_feedback(problem, k=2) == [verdicts["crash"].feedback, verdicts["slow"].feedback]
    assert log.last_feedback(problem_key(problem), k=9)[-1] == verdicts["wrong"].feedback
    assert log.last_feedback(Problem.op("softmax", rows=8, cols=128)) == [other.feedback]
    batches = {b.name: b for b in log.batches()}
    assert batches["b1"].count == 4 and batches["b1"].statuses == {"reject": 2, "repair": 1, "accept": 1}
    assert batches["b2"].statuses == {"reject": 1} and len(log) == 5


def test_problem_keys_tell_shapes_and_dtypes_apart(tmp_path):
    a, b = Problem.op("rowsum", rows=8, cols=128), Problem.op("rowsum", rows=8, cols=256)
    assert problem_key(a) != problem_key(b)
    assert problem_key(a) != problem_key(Problem.op("rowsum", dtype="float16", rows=8, cols=128))
    rel = Problem.file("x.py")
    assert problem_key(Problem.file("a/../x.py")) == problem_key(rel)  # paths are resolved
    assert problem_key(rel) != problem_key(Problem.file("y.py"))


def test_source_must_be_the_screened_one(tmp_path, verdicts):
    with pytest.raises(ValueError, match="sha256"):
        VerdictLog(tmp_path / "l.sqlite").add(verdicts["fast"], source="something else")


def test_newer_schema_and_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.sqlite"
    db = sqlite3.connect(newer)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError, match="upgrade kernelgate"):
        VerdictLog(newer)
    foreign = tmp_path / "foreign.sqlite"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE accounts (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="something else"):
        VerdictLog(foreign)
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all, just some text that is long enough to have a header" * 10)
    with pytest.raises(StoreError):
        VerdictLog(text)


def test_status_values_in_log_are_the_enum(tmp_path, verdicts):
    log = VerdictLog(tmp_path / "log.sqlite")
    log.add(verdicts["slow"])
    assert log.verdicts()[0].status is Status.repair and log.batches()[0].name is None
