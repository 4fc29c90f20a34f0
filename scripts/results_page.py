"""Write docs/results.md from the records in benchmarks/results/*.json.

    python scripts/results_page.py            # (re)write docs/results.md
    python scripts/results_page.py --check    # exit 1 when docs/results.md differs from what it would write

One section per record: what it measured, the device, the date, the commit and the command when
the record has them, and headline numbers read from the JSON. Nothing on the page comes from
anywhere else, so a figure on it is a figure in a record.

Staleness rule (computed from the JSON and ``git`` alone, never from the clock):

- The record's commit is the ``commit`` field at its top level, or in its ``versions`` or
  ``environment`` block. A commit named only in free text (an ``annotation``) is not read.
- A record with no commit is **stale**: nothing ties its figures to the code as it is now.
- A record whose commit this repository's history does not hold is **stale**.
- Otherwise the record depends on ``kernelgate/``, ``adapters/``, ``reference_ops/`` and
  ``examples/`` (the gate, its adapters, the library side and the shipped kernels), on every
  ``benchmarks/....py`` file its command names, and on ``tests/`` when its command runs
  ``./kg test``. It is **stale** when ``git rev-list <commit>..HEAD -- <those paths>`` is not
  empty, and the page names the earliest such commit; otherwise it is **current**.

The earliest later commit does not change as more commits land, so the page changes only when a
record is added or edited, or when a current record first goes stale. The page does not depend on
the working tree's uncommitted changes, the date, or the machine.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("benchmarks/results")
PAGE = Path("docs/results.md")
CODE = ("kernelgate/", "adapters/", "reference_ops/", "examples/")

# What a record measured, by the script its command runs (first match wins).
MEASURES = (
    ("benchmarks/truth.py", "Independent labels (correct? efficient?) for the study corpus and the "
     "out-of-sample kernels, measured by a harness that imports nothing of kernelgate."),
    ("benchmarks/score_truth.py score", "The gate's verdicts scored against the independent labels, "
     "in-sample and out-of-sample apart (see docs/study_truth.md)."),
    ("benchmarks/score_truth.py screen", "The gate's verdicts on the study corpus and the out-of-sample "
     "kernels, for scoring against the independent labels."),
    ("benchmarks/study.py", "The study corpus: each kernel screened at full shape, the verdict set "
     "against what fixing the kernel showed (see docs/study.md)."),
    ("benchmarks/throughput.py", "Candidates per hour for a batch screened with `screen_many`, and "
     "how far each candidate's LRE moved between runs."),
    ("benchmarks/library_ops.py", "The library op's own time against the roofline floor, for each "
     "catalogue op and dtype (see docs/reference_ops.md)."),
    ("benchmarks/hostile.py", "The hostile fixtures (exploits and faults), each screened, and "
     "whether the gate caught it (see docs/hostile.md)."),
    ("benchmarks/kernelbench_batch.py", "The shipped KernelBench demo batch through `kernelgate "
     "batch`: verdicts, the verdict log and the HTML report."),
    ("benchmarks/ncu_traffic.py", "DRAM bytes per screen counted by Nsight Compute (`--ncu`), "
     "against the compulsory bytes."),
    ("benchmarks/timing_contention.py", "Event times of short kernels under four host conditions, "
     "with and without the GPU idle window after the L2 flush."),
    ("benchmarks/boundary.py", "The trust boundary's cost and resolution: each example screened, the "
     "candidate's own event time beside the judge's clock around each timed call (see docs/hostile.md)."),
    ("benchmarks/redteam.py", "The red team's hostile candidates against the judge/candidate split, each "
     "screened, and whether it was rejected (see docs/hostile.md)."),
    ("benchmarks/kernelbench_all.py", "Every KernelBench problem of the levels named, at its shipped "
     "shape, with one honest candidate each: the gate's verdict, seconds and memory, and KernelBench's "
     "own eval on the same candidates in the same run."),
    ("benchmarks/probes/", "A one-off probe outside the gate (see the annotation)."),
    ("./kg test", "The test suite's GPU-marked tests."),
    ("./kg examples", "The shipped example kernels screened by `./kg examples` at their problems' "
     "full shapes."),
)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def header(record: dict) -> dict:
    """command, date, device name and commit, wherever the record keeps them."""
    if isinstance(record.get("header"), dict) and "cases" in record:  # benchmarks/redteam.py's layout
        record = {**record["header"], **record}
    if isinstance(record.get("runs"), list) and record["runs"] and "problems" in record:  # kernelbench_all.py
        record = {**record["runs"][-1], **record}
    if isinstance(record.get("meta"), dict) and "entries" in record:  # truth.py
        record = {**record["meta"], "commit": record["meta"].get("git_commit"), **record}
    if isinstance(record.get("gate_meta"), dict) and "disagreements" in record:  # score_truth.py score
        gate = record["gate_meta"]
        record = {"date": gate.get("date"), "device": gate.get("device"), "commit": gate.get("commit"), **record}
    env = record.get("environment") if isinstance(record.get("environment"), dict) else {}
    versions = record.get("versions") if isinstance(record.get("versions"), dict) else {}
    device = record.get("device", env.get("device"))
    if isinstance(device, dict):
        device = device.get("name")
    commit = record.get("commit") or versions.get("commit") or env.get("commit")
    return {"command": record.get("command", env.get("command")), "date": record.get("date", env.get("date")),
            "device": device, "commit": commit}


def depends_on(command: str | None) -> list[str]:
    paths = list(CODE)
    for script in re.findall(r"benchmarks/[\w/.-]+?\.py", command or ""):
        if script not in paths:
            paths.append(script)
    if "./kg test" in (command or ""):
        paths.append("tests/")
    return paths


def staleness(commit: str | None, command: str | None) -> tuple[bool, str]:
    """(stale, why) by the rule in the module docstring."""
    if not commit:
        return True, "stale: the record names no commit"
    try:
        full = git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    except subprocess.CalledProcessError:
        return True, f"stale: commit `{commit}` is not in this repository's history"
    later = git("rev-list", "--reverse", f"{full}..HEAD", "--", *depends_on(command)).split()
    if later:
        return True, f"stale: `{later[0][:10]}` and later commits changed code it depends on"
    return False, "current: no later commit changed code it depends on"


def num(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def counts(d: dict | None) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted((d or {}).items())) or "-"


def table(head: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(num(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return out + [""]


def run_summary(s: dict) -> str:
    stages = s.get("median_stage_seconds") or {}
    parts = [f"{num(s.get('candidates'))} candidates in {num(s.get('wall_seconds'))} s "
             f"({num(s.get('candidates_per_hour'))} an hour)", f"verdicts: {counts(s.get('by_status'))}"]
    if stages:
        parts.append("median seconds per stage: " + ", ".join(
            f"{k} {num(stages[k], 3)}" for k in ("worker_start", "turn_wait", "numerics", "artifacts", "timing")
            if k in stages))
    if "gpu_timing_share_of_wall" in s:
        parts.append(f"timing turns {num(100 * s['gpu_timing_share_of_wall'], 3)}% of the wall time")
    return "; ".join(parts)


# -- headline numbers, by the record's shape ---------------------------------------------------

def screens(r: dict) -> list[str]:
    s = r["summary"]
    expected = s.get("with_expectation", s.get("screens"))
    out = [f"- {num(s.get('screens'))} screens of {num(s.get('cases'))} cases; {num(s.get('as_expected'))} "
           f"of {num(expected)} with an expectation got it.",
           f"- Median seconds per screen: {num(s.get('seconds_per_screen_median'))} "
           f"({num(s.get('seconds_per_screen_excluding_compile_median'))} excluding compilation)."]
    change = s.get("lre_relative_change_between_two_screens")
    if change:
        under = sum(v < 0.01 for v in change.values())
        out.append(f"- LRE change between the two screens of a case: under 1% for {under} of {len(change)}; "
                   + ", ".join(f"{k} {num(100 * v, 2)}%" for k, v in sorted(change.items())) + ".")
    out.append("")
    rows = [[x["case"], x.get("dsl", "triton"), x["status"] + (f" ({x['reason']})" if x.get("reason") else ""),
             x.get("expected_on_gpu"), x.get("as_expected"), x.get("t_candidate_ms"), x.get("t_library_ms"),
             x.get("lre"), x.get("u_candidate"), ", ".join(dict.fromkeys(x.get("findings") or []))] for x in r["results"]]
    return out + table(["case", "dsl", "verdict", "expected", "as expected", "t ms", "t_library ms", "LRE", "U",
                        "findings"], rows)


def study(r: dict) -> list[str]:
    a = r["agreement_default_policy"]["summary"]
    fit = r.get("fit", {})
    out = [f"- Run: {run_summary(r['run'])}.",
           f"- Agreement with the default policy: {a['agree']} of {a['cases']}; inefficient flagged "
           f"{a['inefficient_flagged']} of {a['inefficient']}; efficient accepted {a['efficient_accepted']} "
           f"of {a['efficient']}."]
    if fit:
        j = fit.get("judge", {}).get("summary", {})
        out.append(f"- Thresholds chosen on the fit half: {json.dumps(fit.get('chosen'), sort_keys=True)} ({num(fit.get('fit_agree'))} of "
                   f"{num(fit.get('fit', {}).get('cases'))} agree); on the judge half {num(j.get('agree'))} of "
                   f"{num(j.get('cases'))}.")
    rows = [[c["name"], c.get("status"), c.get("t_candidate_ms"), c.get("t_library_ms"), c.get("lre"),
             c.get("u_candidate")] for c in r["cases"]]
    return out + [""] + table(["kernel", "verdict", "t ms", "t_library ms", "LRE", "U"], rows)


def throughput_modes(r: dict) -> list[str]:
    b = r["batch"]
    out = [f"- Batch: {num(b.get('candidates'))} candidates per mode ({num(b.get('distinct_cases'))} cases x "
           f"{num(b.get('copies'))}), every candidate a mutated source of its own (`benchmarks/mutate.py`).", ""]
    rows = []
    for mode, m in r["modes"].items():
        s, cache, settings = m["summary"], m.get("cache") or {}, m.get("settings") or {}
        stages = s.get("median_stage_seconds") or {}
        rows.append([mode, settings.get("concurrency"), settings.get("timing_adaptive"), s.get("candidates"),
                     s.get("wall_seconds"), s.get("candidates_per_hour"), counts(s.get("by_status")),
                     f"{num(cache.get('files_before'))} -> {num(cache.get('files_after'))}", stages.get("compile"),
                     stages.get("total")])
    return out + table(["mode", "concurrency", "adaptive", "candidates", "wall s", "an hour", "verdicts",
                        "cache files", "median compile s", "median total s"], rows)


def throughput(r: dict) -> list[str]:
    if isinstance(r.get("modes"), dict):
        return throughput_modes(r)
    out = [f"- Batch: {num(r['batch'].get('candidates'))} candidates ({num(r['batch'].get('distinct_cases'))} "
           f"cases); options: {json.dumps(r.get('options'), sort_keys=True)}."]
    for run in r.get("runs", []):
        out.append(f"- Run {run['run']}: {run_summary(run['summary'])}.")
    if "partial_run" in r:
        out.append(f"- Partial run (cut off): {run_summary(r['partial_run']['summary'])}.")
    spread = r.get("lre_spread")
    if spread and spread.get("runs", 0) > 1:
        for key in ("long", "short"):
            g = spread[key]
            out.append(f"- LRE spread over {spread['runs']} runs, {key} kernels (threshold "
                       f"{num(spread['threshold_ms'])} ms): {g['under_3_percent']} of {g['candidates']} within 3%; "
                       f"median {num(100 * g['median'], 2)}%, max {num(100 * g['max'], 2)}%.")
    return out + [""]


def library_ops(r: dict) -> list[str]:
    ops, peaks = r["ops"], r.get("peaks") or {}
    flags: dict[str, int] = {}
    for o in ops:
        if o.get("flag"):
            flags[o["flag"]] = flags.get(o["flag"], 0) + 1
    out = [f"- {len(ops)} timings of {len({o['name'] for o in ops})} ops; flags: {counts(flags)}.",
           f"- Peaks ({peaks.get('source', '-')}): copy {num(peaks.get('bw_gbs'))} GB/s; "
           + ", ".join(f"{k} {num(v)}" for k, v in (peaks.get("flops_tflops") or {}).items()) + " TFLOP/s.",
           f"- Math flags: {json.dumps(r.get('math_flags'), sort_keys=True)}.", ""]
    rows = [[o["name"], o["dtype"], o.get("t_library_ms"), o.get("t_floor_ms"), o.get("bound"), o.get("u_library"),
             o.get("flag") or ""] for o in ops]
    return out + table(["op", "dtype", "t_library ms", "t_floor ms", "bound", "U_library", "flag"], rows)


def hostile(r: dict) -> list[str]:
    s = r["summary"]
    return [f"- {s['caught']} of {s['tried']} fixtures caught; survived: {', '.join(s['survived']) or 'none'}; "
            f"skipped: {', '.join(s['skipped']) or 'none'}; the good kernel still served: {num(s.get('good_kernel_served'))}.",
            f"- Problem: {r['problem'].get('name')} {json.dumps(r['problem'].get('shape'), sort_keys=True)}.", ""]


def kernelbench_batch(r: dict) -> list[str]:
    rows = [[v["file"], v["status"] + (f" ({v['reason']})" if v.get("reason") else ""), v.get("lre"),
             v.get("u_candidate")] for v in r["verdicts"]]
    return [f"- Batch `{r['batch']}`: {counts(r['counts'])} in {num(r['seconds_total'])} s; report "
            f"`{r.get('report')}`.", ""] + table(["file", "verdict", "LRE", "U"], rows)


def ncu(r: dict) -> list[str]:
    rows = [[c["name"], c.get("status"), c.get("t_candidate_ms"), c.get("bytes_compulsory"), c.get("dram_bytes"),
             c.get("traffic_ratio"), c.get("ncu_seconds")] for c in r["cases"]]
    return table(["kernel", "verdict", "t ms", "compulsory bytes", "DRAM bytes (ncu)", "ratio", "ncu s"], rows)


def contention(r: dict) -> list[str]:
    conditions = sorted({x["condition"] for x in r["rows"]})
    cells = {(x["case"], x["window_ms"], x["condition"]): x["candidate_ms"] for x in r["rows"]}
    every: dict[tuple, list[float]] = {}
    for x in r["rows"]:
        every.setdefault((x["case"], x["window_ms"]), []).extend(run["candidate_ms"] for run in x.get("runs", []))
    rows = []
    for (case, window), times in sorted(every.items()):
        spread = 100 * (max(times) / min(times) - 1) if times else None
        rows.append([case, window, *[cells.get((case, window, c)) for c in conditions], spread])
    return ["The candidate's time (ms) per host condition, and the spread over every run of every condition",
            "(largest over smallest, in %):", ""] + table(["case", "window ms", *conditions, "spread %"], rows)


def gpu_tests(r: dict) -> list[str]:
    out = [f"- {r['summary']}; {len(r.get('passed', []))} tests passed by name in the record."]
    if r.get("autotuned_test"):
        out.append(f"- The autotuning test, run alone later: {r['autotuned_test']}.")
    for later in r.get("later_runs", []):
        out.append(f"- Later run ({later.get('date')}, commit `{later.get('commit', '-')}`): `{later.get('command')}`: "
                   f"{later.get('summary')}.")
    return out + [""]


def probes(r: dict) -> list[str]:
    rows = [[json.dumps(x["config"], sort_keys=True) if x.get("config") else "default", x.get("candidate_ms"), x.get("cudnn_ms"),
             x.get("permute_ms"), x.get("kernel_only_ms")] for x in r["rows"]]
    return table(["config", "candidate ms", "cuDNN ms", "permute ms", "kernel only ms"], rows)


def clock_probe(r: dict) -> list[str]:
    """The judge-clock probes (``benchmarks/probes/*_clock.py``): per kind and size of work, the judge's
    host clock from its flag store to the candidate's event, beside the candidate's own events."""
    out = [f"- Error: {r['error']}" if r.get("error") else "- Ran to the end.", ""]
    rows = []
    for x in r["rows"]:
        if x.get("kind") == "preflight":
            rows.append(["preflight", x.get("value"), "-", "-", "-", f"enqueue {num(x.get('wait_call_ms'))} ms, "
                         f"host blocking: {x.get('host_blocking')}"])
            continue
        judge, own, gap = (x.get(k) or {} for k in ("judge_ms", "candidate_ms", "judge_minus_candidate_ms"))
        rows.append([x.get("kind"), x.get("amount"), num(judge.get("median")), num(own.get("median")),
                     f"{num(gap.get('median'))} ({num(gap.get('p10'))} to {num(gap.get('p90'))})", "-"])
    return out + table(["kind", "amount", "judge ms", "candidate ms", "judge - candidate ms (p10 to p90)", "note"], rows)


def generic(r: dict) -> list[str]:
    flat = [(k, v) for k, v in r.items() if isinstance(v, (int, float, str)) and k not in ("command", "date")]
    return [f"- {k}: {num(v)}" for k, v in flat] + [""]


def boundary(r: dict) -> list[str]:
    rows = [[x["name"], x["status"], x.get("reason"), x.get("event_median_ms"), x.get("judge_wall_median_ms"),
             x.get("overhead_ms"), x.get("unexplained_ms"), x.get("seconds_excluding_compile")] for x in r["rows"]]
    out = [f"- Unexplained ms per timed call (judge's clock less calibrated overhead less events), over the "
           f"timed screens: {json.dumps(r.get('unexplained_ms'))}",
           f"- Median seconds per screen, compile excluded: {num(r.get('seconds_per_screen_excluding_compile_median'))}",
           "- The statuses are those of the policy at the record's commit.", ""]
    return out + table(["example", "status", "reason", "event ms", "judge wall ms", "overhead ms", "unexplained ms",
                        "s excl. compile"], rows)


def redteam(r: dict) -> list[str]:
    cases = r["cases"]
    missed = [c["name"] for c in cases if c.get("caught") is False]
    rows = [[c["name"], c["class"], c["status"], c.get("reason"), c.get("lre")] for c in cases]
    return [f"- {len(cases) - len(missed)} of {len(cases)} rejected; not rejected: {', '.join(missed) or 'none'}", ""] \
        + table(["case", "class", "status", "reason", "LRE"], rows)


def kernelbench_all(r: dict) -> list[str]:
    s, problems = r.get("summary") or {}, r["problems"]
    out = [f"- Runs: {len(r.get('runs') or [])}; problems screened: {s.get('screened')} of {s.get('problems')}; "
           f"by status: {counts(s.get('by_status'))}; by reason: {counts(s.get('by_reason'))}",
           f"- Gate faults: {', '.join(s.get('gate_errors') or []) or 'none'}; out of memory: "
           f"{', '.join(s.get('out_of_memory') or []) or 'none'}",
           f"- Median seconds per screen: {num(s.get('median_gate_seconds'))}; the judge's peak over the "
           f"footprint: median {num(s.get('peak_over_footprint_median'))}, max {num(s.get('peak_over_footprint_max'))}",
           ""]
    side = [(key, x) for key, x in problems.items() if (x.get("kernelbench_eval") or {}).get("seconds_wall")]
    if not side:
        return out
    rows = []
    for key, x in side:
        gate, kb = x.get("gate") or {}, x["kernelbench_eval"]
        kb_said = ("did not finish" if kb.get("timed_out") else
                   f"compiled={kb.get('compiled')} correct={kb.get('correctness')}")
        alone = x.get("gate_alone") or {}
        rows.append([key, x.get("file"), gate.get("status"), gate.get("reason"), gate.get("wall_seconds"),
                     alone.get("seconds_wall"), kb_said, kb.get("seconds_wall")])
    a = s.get("gate_alone") or {}
    if a.get("both"):
        out += [f"- One at a time, same candidates ({a['both']}): the gate's median {num(a.get('gate_median_seconds'))} s "
                f"per candidate, KernelBench's {num(a.get('kernelbench_median_seconds'))} s; the gate's verdict came "
                f"first on {a.get('gate_faster')} of {a['both']}", ""]
    return out + ["The same candidates, the same run: the gate's verdict and seconds per candidate (wall, "
                  "concurrency as in the command; alone: screened by itself just before KernelBench's eval) beside "
                  "KernelBench's `eval_kernel_against_ref`:", ""] + table(
        ["problem", "file", "gate", "gate reason", "gate s", "gate alone s", "KernelBench", "KernelBench s"], rows)


def truth(r: dict) -> list[str]:
    s = r.get("summary") or {}
    return [f"- {num(s.get('entries'))} entries; labels: {counts(s.get('labels'))}; the kernel's stated intent "
            f"matches its label for {num(s.get('intent_matches_label'))} of {num(s.get('with_intent_and_label'))}.",
            ""]


def study_truth(r: dict) -> list[str]:
    rows = []
    for corpus, s in (r.get("summary") or {}).items():
        ax_c, ax_e = s.get("correctness_axis") or {}, s.get("efficiency_axis") or {}
        rows.append([corpus.replace("_", "-"), s.get("entries"), s.get("counted"), s.get("agree"), s.get("disagree"),
                     f"{num(ax_c.get('agree'))}/{num(ax_c.get('disagree'))}",
                     f"{num(ax_e.get('agree'))}/{num(ax_e.get('disagree'))}"])
    out = [f"- Truth: `{r.get('truth_file')}`; gate: `{r.get('gate_file')}`.", ""]
    out += table(["corpus", "entries", "counted", "agree", "disagree", "correctness agree/disagree",
                  "efficiency agree/disagree"], rows)
    out += [f"- Disagreement: {d['name']} ({d['corpus'].replace('_', '-')}): {d['kind']}." for d in r.get("disagreements", [])]
    return out + [""]


def headline(r: dict) -> list[str]:
    if "meta" in r and "entries" in r:
        return truth(r)
    if "gate_meta" in r and "disagreements" in r:
        return study_truth(r)
    if "problems" in r and "summary" in r and isinstance(r["problems"], dict):
        return kernelbench_all(r)
    if "rows" in r and r["rows"] and "unexplained_ms" in r:
        return boundary(r)
    if "cases" in r and "header" in r and r["cases"] and "class" in r["cases"][0]:
        return redteam(r)
    if "agreement_default_policy" in r:
        return study(r)
    if "results" in r and "summary" in r:
        return screens(r)
    if "batch" in r and ("runs" in r or "partial_run" in r or "modes" in r) and isinstance(r["batch"], dict):
        return throughput(r)
    if "ops" in r and "peaks" in r:
        return library_ops(r)
    if "cases" in r and "summary" in r and "caught" in r["summary"]:
        return hostile(r)
    if "verdicts" in r and "counts" in r:
        return kernelbench_batch(r)
    if "cases" in r and r["cases"] and "traffic_ratio" in r["cases"][0]:
        return ncu(r)
    if "rows" in r and r["rows"] and "condition" in r["rows"][0]:
        return contention(r)
    if "passed" in r:
        return gpu_tests(r)
    if "rows" in r and "reps" in r and "error" in r:
        return clock_probe(r)
    if "rows" in r:
        return probes(r)
    return generic(r)


def measured(command: str | None) -> str:
    for key, text in MEASURES:
        if key in (command or ""):
            return text
    return "Not described: the command matches no known script."


def render() -> str:
    files = sorted((ROOT / RESULTS).glob("*.json"))
    others = sorted(p.name for p in (ROOT / RESULTS).iterdir() if p.is_file() and p.suffix != ".json")  # a folder git does not hold is not a record
    index, sections = [], []
    for path in files:
        record = json.loads(path.read_text())
        h = header(record)
        stale, why = staleness(h["commit"], h["command"])
        name = path.name
        index.append([f"[`{name}`](#{name.replace('.', '').lower()})", (h["date"] or "-")[:10], h["device"],
                      f"`{h['commit']}`" if h["commit"] else "-", "stale" if stale else "current"])
        lines = [f"## {name}", "", measured(h["command"]), "",
                 f"- Record: `{RESULTS / name}`",
                 f"- Device: {h['device'] or '-'}",
                 f"- Date: {h['date'] or '-'}",
                 f"- Commit: {'`' + h['commit'] + '`' if h['commit'] else 'none recorded'}",
                 f"- Command: `{h['command']}`" if h["command"] else "- Command: none recorded",
                 f"- Status: {why}", ""]
        if record.get("annotation"):
            lines += ["> " + " ".join(str(record["annotation"]).split()), ""]
        lines += headline(record)
        sections.append("\n".join(lines))
    intro = [
        "# Results",
        "",
        "<!-- Generated by scripts/results_page.py from benchmarks/results/*.json. Do not edit by hand:",
        "     run `python scripts/results_page.py`; `--check` (run by the tests) fails when this page",
        "     and the records disagree. -->",
        "",
        "Every figure below is read from the record its section names. A record is **stale** when it",
        "names no commit, when this repository's history lacks its commit, or when a later commit changed",
        "`kernelgate/`, `adapters/`, `reference_ops/`, `examples/` or the script its command runs",
        "(the full rule is at the top of `scripts/results_page.py`). A stale record's figures describe",
        "the code as it was when the record was made.",
        "",
    ]
    intro += table(["record", "date", "device", "commit", "status"], index)
    if others:
        intro += ["Other files in `benchmarks/results/`, not read here: " + ", ".join(f"`{o}`" for o in others) + ".", ""]
    return "\n".join(intro) + "\n" + "\n".join(sections).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/results.md differs")
    args = parser.parse_args(argv)
    text, page = render(), ROOT / PAGE
    if args.check:
        current = page.read_text() if page.exists() else ""
        if current == text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                   str(PAGE), "generated"))
        print(f"{PAGE} differs from the records: run python scripts/results_page.py", file=sys.stderr)
        return 1
    page.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
