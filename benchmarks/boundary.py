"""The trust boundary's cost and resolution on a GPU: screen honest examples and record, per screen,
the candidate's own event time, the judge's clock around each timed call, the harness overhead
subtracted from it, and the library timed beside the candidate and alone.

    python benchmarks/boundary.py --out $OUT/boundary_h200.json [--only rowsum_good matmul_good]

The "unexplained" wall per call (judge wall - overhead - event time, median over repetitions) is
what a candidate could hide outside its events without tripping the policy's wall check
(``Policy.wall_excess_factor`` x event + ``wall_excess_floor_ms``); its spread over honest kernels
is the check's resolution. Writes JSON with the device, versions, commit and command line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _record import run_header  # noqa: E402
from screen_examples import CASES  # noqa: E402

from kernelgate import Candidate, ScreenOptions, screen  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stream-check", action="store_true", help="the judge-clocked stream on (ScreenOptions.stream_check; off by default)")
    args = parser.parse_args(argv)
    rows = []
    for case in CASES:
        if args.only and not any(word in case.name for word in args.only):
            continue
        source = (ROOT / "examples" / case.candidate).read_text()
        began = time.perf_counter()
        try:
            verdict = screen(Candidate(source=source, name=case.name), case.problem_spec(gpu=True),
                             # an older kernelgate (the cost's "before") has no stream_check option at all
                             options=ScreenOptions(**({"stream_check": True} if args.stream_check else {})))
        except Exception as exc:  # a gate fault (or an older kernelgate that lacks an API): recorded, not fatal
            rows.append({"name": case.name, "status": "error", "message": f"{type(exc).__name__}: {str(exc)[:300]}"})
            _write(args.out, argv, rows)
            print(json.dumps(rows[-1]), flush=True)
            continue
        seconds = time.perf_counter() - began
        t = verdict.timing
        row = {"name": case.name, "status": verdict.status.value, "reason": verdict.reason.value if verdict.reason else None,
               "message": verdict.failure.message[:400] if verdict.failure else None, "seconds": round(seconds, 3),
               "stage_seconds": verdict.seconds}
        if t is not None:
            c = t.candidate
            row.update(event_median_ms=c.median_ms, judge_wall_median_ms=c.wall_median_ms,
                       overhead_ms=t.launch_overhead_ms,
                       unexplained_ms=c.wall_median_ms - t.launch_overhead_ms - c.median_ms,
                       library_median_ms=t.library.median_ms, library_alone_ms=getattr(t, "library_alone_median_ms", None),
                       runner_median_ms=getattr(t, "runner_median_ms", None),
                       window_ms=getattr(t, "launch_window_ms", None), reps=c.reps,
                       resolution_ms=getattr(t, "wall_resolution_ms", None),
                       candidate_cpu_ms=getattr(t, "candidate_cpu_ms", None))
            clock = _stream_clock(t)
            if clock is not None:  # the judge's clock over a stream of calls
                from kernelgate.policy import DEFAULT_POLICY

                explained = clock.explained_ms(c.median_ms, DEFAULT_POLICY)
                row.update(stream_calls=t.stream_calls, stream_ms=t.stream_ms, stream_cpu_ms=t.stream_cpu_ms,
                           library_stream_ms=t.library_stream_ms, stream_overhead_ms=t.stream_overhead_ms,
                           stream_explained_ms=round(explained, 6),
                           stream_over_explained=round(t.stream_ms / explained, 4) if explained > 0 else None)
        if getattr(verdict, "memory", None) is not None:
            row["memory"] = verdict.memory.model_dump()
        row["seconds_excluding_compile"] = round(seconds - float(verdict.seconds.get("compile", 0.0)), 3)
        rows.append(row)
        _write(args.out, argv, rows)
        print(json.dumps({k: row.get(k) for k in ("name", "status", "reason", "seconds", "event_median_ms",
                                                  "judge_wall_median_ms", "runner_median_ms", "overhead_ms", "unexplained_ms",
                                                  "library_median_ms", "library_alone_ms", "stream_calls", "stream_ms",
                                                  "stream_cpu_ms", "library_stream_ms", "stream_over_explained")}),
              flush=True)
        if row["message"]:
            print("   ", row["message"][:300], flush=True)
    _write(args.out, argv, rows)
    return 0


def _stream_clock(timing):
    """The policy's reading of the stream (None from a kernelgate without the stream check)."""
    try:
        from kernelgate.policy import StreamClock
    except ImportError:
        return None
    return StreamClock.of(timing)


def _write(out: Path, argv: list[str] | None, rows: list[dict]) -> None:
    """The record so far (rewritten after every screen, so a cut run keeps what finished)."""
    unexplained = [r["unexplained_ms"] for r in rows if "unexplained_ms" in r]
    seconds = [r["seconds_excluding_compile"] for r in rows if "seconds_excluding_compile" in r]
    record = {**run_header("python benchmarks/boundary.py", argv), "rows": rows,
              "unexplained_ms": {"median": statistics.median(unexplained), "max": max(unexplained),
                                 "min": min(unexplained)} if unexplained else None,
              "seconds_per_screen_excluding_compile_median": statistics.median(seconds) if seconds else None,
              "rejected": [r["name"] for r in rows if r["status"] == "reject"],
              "stream_over_explained_max": max((r["stream_over_explained"] for r in rows
                                                if r.get("stream_over_explained") is not None), default=None)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    sys.exit(main())
