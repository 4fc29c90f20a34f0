"""The verdict log: every verdict a loop produced, in one SQLite file.

    log = VerdictLog("kernelgate.sqlite")          # created on first use; ./kernelgate.sqlite by default
    log.add(verdict, batch="run-7", generator={"model": "qwen", "round": 2})
    log.last_feedback(problem, k=3)                 # for the next prompt
    rank(log.verdicts(batch="run-7"))               # best first (kernelgate.rank)

One row per verdict: when, which batch, the problem's key, the candidate's sha256, name and DSL,
status, reason, LRE with its interval, U of candidate and library, the generator's metadata and
the seconds per stage as JSON, the candidate's source when given, and the whole verdict as JSON (``Verdict.model_validate_json``
reads it back). The schema's version is SQLite's ``user_version``; a file written by a newer
kernelgate is refused rather than misread. The file stays one file: the default rollback journal
is used, not WAL (which keeps two more files beside it).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgate.errors import KernelgateError
from kernelgate.models import Problem, Status, Verdict

__all__ = ["VerdictLog", "LogEntry", "BatchInfo", "StoreError", "problem_key", "DEFAULT_PATH", "SCHEMA_VERSION"]

DEFAULT_PATH = Path("kernelgate.sqlite")
"""Where the log goes when no path is given: the current directory."""

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at       TEXT NOT NULL,
    batch            TEXT,
    problem_key      TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL,
    candidate_name   TEXT,
    dsl              TEXT,
    status           TEXT NOT NULL,
    reason           TEXT,
    confidence       REAL NOT NULL,
    lre              REAL,
    lre_low          REAL,
    lre_high         REAL,
    u_candidate      REAL,
    u_library        REAL,
    feedback         TEXT NOT NULL,
    generator_json   TEXT NOT NULL,
    seconds_json     TEXT NOT NULL,
    verdict_json     TEXT NOT NULL,
    candidate_source TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_batch ON verdicts (batch, id);
CREATE INDEX IF NOT EXISTS verdicts_problem ON verdicts (problem_key, id);
CREATE INDEX IF NOT EXISTS verdicts_sha ON verdicts (candidate_sha256);
"""


class StoreError(KernelgateError):
    """The log file cannot be used (written by a newer schema, or not a kernelgate log)."""


def problem_key(problem: Problem) -> str:
    """A stable text key for a problem: kind, name, shape overrides and dtype.

    ``op:layernorm{rows=8,cols=128}:float32`` or ``file:/abs/path/40_LayerNorm.py``.
    """
    name = problem.name
    if problem.kind == "kernelbench_file":
        name = str(Path(name).resolve())
    prefix = "op" if problem.kind == "reference_op" else "file"
    key = f"{prefix}:{name}"
    if problem.shape:
        key += "{" + ",".join(f"{k}={v}" for k, v in sorted(problem.shape.items())) + "}"
    if problem.dtype:
        key += f":{problem.dtype}"
    return key


@dataclass
class LogEntry:
    """One row of the log."""

    id: int
    created_at: str
    """UTC, ISO 8601."""
    batch: str | None
    problem_key: str
    generator: dict[str, Any]
    verdict: Verdict
    source: str | None = None
    """The candidate's source, when it was given to ``add``."""


@dataclass
class BatchInfo:
    """One batch: its name, how many verdicts, when it began and ended, how many of each status."""

    name: str | None
    count: int
    first_at: str
    last_at: str
    statuses: dict[str, int] = field(default_factory=dict)


class VerdictLog:
    """An SQLite file of verdicts. Safe to share between threads of one process."""

    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not an SQLite file: {exc}") from exc
        if version > SCHEMA_VERSION:
            self._db.close()
            raise StoreError(f"{self.path} has schema version {version}; this kernelgate reads up to "
                             f"{SCHEMA_VERSION}: upgrade kernelgate")
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and tables - {"verdicts", "sqlite_sequence"}:
            self._db.close()
            raise StoreError(f"{self.path} is an SQLite file of something else (tables: {', '.join(sorted(tables))})")
        with self._db:
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # --- writing -------------------------------------------------------------------------------

    def add(self, verdict: Verdict, *, batch: str | None = None, generator: dict[str, Any] | None = None,
            source: str | None = None) -> int:
        """Append one verdict; returns its row id.

        ``generator``: the model, endpoint, round, prompt hash... ``source``: the candidate's source, kept
        so that the best one can be taken back out of the log (``LogEntry.source``).
        """
        if source is not None and hashlib.sha256(source.encode()).hexdigest() != verdict.candidate_sha256:
            raise ValueError("source is not the screened candidate's (its sha256 differs from the verdict's)")
        m = verdict.metrics
        row = (
            _now(), batch, problem_key(verdict.problem), verdict.candidate_sha256, verdict.candidate_name,
            verdict.dsl, verdict.status.value, verdict.reason.value if verdict.reason else None, verdict.confidence,
            m.lre if m else None, m.lre_low if m else None, m.lre_high if m else None,
            m.u_candidate if m else None, m.u_library if m else None, verdict.feedback,
            json.dumps(generator or {}, sort_keys=True, default=str), json.dumps(verdict.seconds, sort_keys=True),
            verdict.model_dump_json(), source,
        )
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO verdicts (created_at, batch, problem_key, candidate_sha256, candidate_name, dsl, status,"
                " reason, confidence, lre, lre_low, lre_high, u_candidate, u_library, feedback, generator_json,"
                " seconds_json, verdict_json, candidate_source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row)
            return int(cur.lastrowid)

    # --- reading -------------------------------------------------------------------------------

    def entries(self, *, batch: str | None = None, problem: Problem | str | None = None,
                sha256: str | None = None) -> list[LogEntry]:
        """Rows in the order they were added, filtered by batch, problem (or its key) and candidate hash."""
        where, args = self._where(batch=batch, problem=problem, sha256=sha256)
        rows = self._query("SELECT id, created_at, batch, problem_key, generator_json, verdict_json, candidate_source"
                           f" FROM verdicts{where} ORDER BY id", args)
        return [LogEntry(id=r[0], created_at=r[1], batch=r[2], problem_key=r[3], generator=json.loads(r[4]),
                         verdict=Verdict.model_validate_json(r[5]), source=r[6]) for r in rows]

    def verdicts(self, *, batch: str | None = None, problem: Problem | str | None = None) -> list[Verdict]:
        """The verdicts themselves, in the order they were added."""
        return [e.verdict for e in self.entries(batch=batch, problem=problem)]

    def last_reject_reasons(self, problem: Problem | str, k: int = 3) -> list[tuple[str, str]]:
        """(reason code, feedback) of the problem's last ``k`` rejects, newest first."""
        where, args = self._where(problem=problem)
        rows = self._query(f"SELECT reason, feedback FROM verdicts{where} AND status = ? ORDER BY id DESC LIMIT ?",
                           (*args, Status.reject.value, k))
        return [(r[0], r[1]) for r in rows]

    def last_feedback(self, problem: Problem | str, k: int = 3) -> list[str]:
        """Feedback texts of the problem's last ``k`` verdicts that were not accepted, newest first.

        Rejects and repairs alike: what a generator should hear before its next attempt.
        """
        where, args = self._where(problem=problem)
        rows = self._query(f"SELECT feedback FROM verdicts{where} AND status != ? ORDER BY id DESC LIMIT ?",
                           (*args, Status.accept.value, k))
        return [r[0] for r in rows]

    def batches(self) -> list[BatchInfo]:
        """Every batch name with its counts, oldest first (None: verdicts added without a batch)."""
        rows = self._query("SELECT batch, status, COUNT(*), MIN(created_at), MAX(created_at), MIN(id) FROM verdicts"
                           " GROUP BY batch, status ORDER BY MIN(id)", ())
        found: dict[str | None, BatchInfo] = {}
        for name, status, count, first, last, _ in rows:
            info = found.setdefault(name, BatchInfo(name=name, count=0, first_at=first, last_at=last))
            info.count += count
            info.statuses[status] = count
            info.first_at, info.last_at = min(info.first_at, first), max(info.last_at, last)
        return list(found.values())

    def __len__(self) -> int:
        return self._query("SELECT COUNT(*) FROM verdicts", ())[0][0]

    # --- plumbing ------------------------------------------------------------------------------

    @staticmethod
    def _where(*, batch: str | None = None, problem: Problem | str | None = None,
               sha256: str | None = None) -> tuple[str, tuple]:
        clauses, args = ["1 = 1"], []
        if batch is not None:
            clauses.append("batch = ?")
            args.append(batch)
        if problem is not None:
            clauses.append("problem_key = ?")
            args.append(problem if isinstance(problem, str) else problem_key(problem))
        if sha256 is not None:
            clauses.append("candidate_sha256 = ?")
            args.append(sha256)
        return " WHERE " + " AND ".join(clauses), tuple(args)

    def _query(self, sql: str, args: tuple) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> VerdictLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
