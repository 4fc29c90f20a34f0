"""Screen every red-team candidate (tests/redteam_cases.py) and write what the gate said about each.

    PYTHONSAFEPATH=1 .venv/bin/python benchmarks/redteam.py --out benchmarks/results/redteam_h200.json  # on the H200
    PYTHONSAFEPATH=1 .venv/bin/python benchmarks/redteam.py --out /tmp/redteam_cpu.json   # CPU: GPU cases skipped

On a GPU every case runs, at the shapes of ``gpu_problem`` (catalogue ops at 4096 x 4096,
KernelBench files at their shipped shape); without one, the CPU cases run at their small shapes.
One worker pool serves every case, in order. A screen that raises instead of returning a verdict
is recorded with status ``error`` (a finding too: a bad candidate must never make ``screen`` raise).
Each record: name, class, status, reason, message, caught, needs_gpu, problem, seconds, note.
Exit status 1 if any case was not rejected.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed kernelgate first; tests/ from the source folder

from kernelgate import Candidate, ScreenOptions, Status, screen  # noqa: E402
from kernelgate.worker import WorkerPool  # noqa: E402
from tests.redteam_cases import CASES, NOTES, gpu_problem, source  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _record import run_header  # noqa: E402


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where to write the JSON record")
    parser.add_argument("--table", help="print docs/hostile.md's table from this record instead of screening")
    parser.add_argument("--only", nargs="*", default=None, help="case file names to run (default: all)")
    parser.add_argument("--small", action="store_true", help="CPU-sized shapes even on a GPU")
    parser.add_argument("--load-timeout", type=float, default=20.0)
    parser.add_argument("--run-timeout", type=float, default=30.0)
    parser.add_argument("--stream-check", action="store_true", help="the judge-clocked stream on (ScreenOptions.stream_check; off by default)")
    args = parser.parse_args(argv)
    if args.table:
        print(_table(json.loads(Path(args.table).read_text())))
        return 0
    if not args.out:
        parser.error("--out is required unless --table is given")
    gpu = _has_gpu()
    options = ScreenOptions(load_timeout_s=args.load_timeout, run_timeout_s=args.run_timeout,
                            stream_check=args.stream_check)
    pool = WorkerPool(spares=2)
    records = []
    began = time.perf_counter()

    def write() -> None:  # after every case: a run cut short keeps what finished
        header = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "gpu": gpu,
                  "python": platform.python_version(), "argv": sys.argv,
                  "seconds": round(time.perf_counter() - began, 1), **run_header("python benchmarks/redteam.py")}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"header": header, "cases": records}, indent=1) + "\n")

    try:
        for name, cls, problem, entry, needs_gpu in CASES:
            if args.only and name not in args.only:
                continue
            if needs_gpu and not gpu:
                records.append({"name": name, "class": cls, "status": "skipped", "reason": None,
                                "message": "needs a GPU", "caught": None, "needs_gpu": True})
                continue
            target = gpu_problem(problem, name) if gpu and not args.small else problem
            t0 = time.perf_counter()
            record = {"name": name, "class": cls, "needs_gpu": needs_gpu,
                      "problem": target.model_dump(mode="json"), "note": NOTES.get(name)}
            try:
                verdict = screen(Candidate(source=source(name), entry=entry, name=name), target,
                                 options=options, runner=pool)
                record.update(status=verdict.status.value, reason=verdict.reason.value if verdict.reason else None,
                              message=(verdict.failure.message if verdict.failure else verdict.summary)[:600],
                              caught=verdict.status is Status.reject,
                              lre=verdict.metrics.lre if verdict.metrics else None)
                if verdict.timing is not None:  # enough to re-decide the wall check offline
                    t = verdict.timing
                    record["timing"] = {"event_median_ms": t.candidate.median_ms,
                                        "judge_wall_median_ms": t.candidate.wall_median_ms,
                                        "overhead_ms": t.launch_overhead_ms, "resolution_ms": t.wall_resolution_ms,
                                        "library_median_ms": t.library.median_ms,
                                        "library_alone_ms": t.library_alone_median_ms,
                                        **{k: getattr(t, k, None) for k in ("stream_calls", "stream_ms", "stream_cpu_ms",
                                                                            "library_stream_ms", "stream_overhead_ms")}}
            except Exception as exc:  # screen must not raise on a bad candidate: record it
                record.update(status="error", reason=type(exc).__name__, message=str(exc)[:600], caught=False)
            record["seconds"] = round(time.perf_counter() - t0, 2)
            records.append(record)
            write()
            print(f"{name:36s} class {cls:5s} {record['status']:9s} {record['reason'] or '':24s} "
                  f"{record['seconds']:6.1f}s", flush=True)
    finally:
        pool.close()
    write()
    missed = [r["name"] for r in records if r.get("caught") is False]
    print(f"{len(records)} cases, {len(missed)} not rejected: {', '.join(missed) or 'none'}")
    return 1 if missed else 0


def _table(record: dict) -> str:
    """The markdown table of docs/hostile.md's red-team section: each case's class, what it tries
    (the first line of its docstring) and what the gate said in the record."""
    import ast

    lines = ["| case | class | what it tries | verdict |", "| --- | --- | --- | --- |"]
    for case in record["cases"]:
        doc = ast.get_docstring(ast.parse(source(case["name"]))) or ""
        what = doc.splitlines()[0].split(":", 1)[-1].strip().replace("|", "/") if doc else ""
        said = case["status"] + (f": {case['reason']}" if case.get("reason") else "")
        lines.append(f"| `{case['name'].removesuffix('.py')}` | {case['class']} | {what} | {said} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
