"""HTML reports from the verdict log: one page per batch, with its roofline plot.

    from kernelgate.report import write_report
    page = write_report(VerdictLog("kernelgate.sqlite"), "run-7", "reports/")   # reports/run-7.html

The page has a table of every verdict of the batch, best first (``kernelgate.rank``): status,
reason, LRE with its interval, U of candidate and library, times, findings. Below it, each
kernel's evidence: summary, feedback, findings with hints, numerics trials, timing, the failure's
message, notes. All text is escaped; the page needs no script and no network. The roofline plot is
a PNG beside the page (``<batch>-roofline.png``), drawn with matplotlib (the ``plots`` extra):

- left panel, for kernels whose FLOPs are counted: arithmetic intensity F/B against attained
  TFLOP/s, with the roof min(P_peak, BW_peak x F/B);
- right panel, every timed kernel: attained bandwidth B/t against the bandwidth peak.

Candidates are dots coloured by status, the library op of the same problem a grey cross. A batch
where nothing was timed (no GPU: every verdict ``untimed`` or ``reject``) has no plot, and the
page says so; so does a machine without matplotlib.
"""

from __future__ import annotations

import datetime
import html
import re
from pathlib import Path

from kernelgate.models import Status, Verdict
from kernelgate.rank import rank
from kernelgate.store import LogEntry, VerdictLog

__all__ = ["write_report", "render_page", "plot_roofline", "NOTHING_TIMED"]

NOTHING_TIMED = "Nothing timed in this batch, so there is no roofline plot"
"""What the page says instead of an empty plot."""

_COLORS = {"accept": "#1a7f37", "repair": "#bf6a02", "structural": "#6f42c1", "untimed": "#57606a",
           "reject": "#cf222e"}

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1f2328; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: bold; }
.status-accept { color: #1a7f37; } .status-repair { color: #bf6a02; } .status-structural { color: #6f42c1; }
.status-untimed { color: #57606a; } .status-reject { color: #cf222e; }
img { max-width: 100%; }
pre { background: #f6f8fa; padding: 0.6em; white-space: pre-wrap; max-width: 100em; }
section.kernel { border-top: 1px solid #d0d7de; margin-top: 1.5em; }
p.note { color: #57606a; }
"""


def _slug(name: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name or "unbatched").strip("._") or "batch"


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _problem_label(v: Verdict) -> str:
    name = Path(v.problem.name).name if v.problem.kind == "kernelbench_file" else v.problem.name
    shape = ",".join(f"{k}={n}" for k, n in sorted(v.problem.shape.items()))
    return name + (f" [{shape}]" if shape else "")


def _label(entry: LogEntry) -> str:
    return entry.verdict.candidate_name or entry.verdict.candidate_sha256[:12]


def plot_roofline(entries: list[LogEntry], path: Path) -> Path | None:
    """Draw the roofline PNG of the timed verdicts; None when nothing was timed.

    Raises ``ImportError`` when matplotlib is not installed.
    """
    timed = [e for e in entries if e.verdict.metrics is not None]
    if not timed:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counted = [e for e in timed if e.verdict.metrics.flops > 0]
    panels = 2 if counted else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 4.4), squeeze=False)
    axes = axes[0]
    if counted:
        ax = axes[0]
        intensities = [e.verdict.metrics.flops / e.verdict.metrics.bytes_compulsory for e in counted]
        lo, hi = min(intensities) / 10, max(intensities) * 10
        roofs = {}
        for e in counted:
            m = e.verdict.metrics
            roofs[(m.peaks.device_name, m.math_mode.value)] = (m.peaks.bw_gbs, m.peaks.tflops(m.math_mode))
        for (device, mode), (bw, peak) in roofs.items():
            xs = [lo * (hi / lo) ** (i / 64) for i in range(65)]
            ax.plot(xs, [min(peak, bw * x / 1e3) for x in xs], color="#8c959f", lw=1.2)
            ax.annotate(f"{device} {mode}: {peak:.4g} TFLOP/s, {bw:.4g} GB/s", (hi, peak), ha="right",
                        va="bottom", fontsize=7, color="#57606a")
        for e, x in zip(counted, intensities):
            m = e.verdict.metrics
            cand, lib = m.flops / (m.t_candidate_ms * 1e9), m.flops / (m.t_library_ms * 1e9)
            ax.plot([x, x], [cand, lib], color="#d0d7de", lw=0.8, zorder=1)
            ax.scatter([x], [lib], marker="x", color="#6e7781", zorder=2)
            ax.scatter([x], [cand], color=_COLORS[e.verdict.status.value], zorder=3)
            ax.annotate(_label(e), (x, cand), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity F/B (FLOP/byte)",
               ylabel="attained TFLOP/s", title="roofline (kernels with counted FLOPs)")
    ax = axes[-1]
    peaks_bw = sorted({e.verdict.metrics.peaks.bw_gbs for e in timed})
    for bw in peaks_bw:
        ax.axhline(bw, color="#8c959f", lw=1.2)
        ax.annotate(f"peak {bw:.4g} GB/s", (len(timed) - 0.5, bw), ha="right", va="bottom", fontsize=7,
                    color="#57606a")
    for i, e in enumerate(timed):
        m = e.verdict.metrics
        cand, lib = m.bytes_compulsory / (m.t_candidate_ms * 1e6), m.bytes_compulsory / (m.t_library_ms * 1e6)
        ax.plot([i, i], [cand, lib], color="#d0d7de", lw=0.8, zorder=1)
        ax.scatter([i], [lib], marker="x", color="#6e7781", zorder=2, label="library" if i == 0 else None)
        ax.scatter([i], [cand], color=_COLORS[e.verdict.status.value], zorder=3)
    ax.set_xticks(range(len(timed)), [_label(e) for e in timed], rotation=30, ha="right", fontsize=7)
    ax.set(yscale="log", ylabel="attained GB/s (compulsory bytes / time)", title="bandwidth (every timed kernel)",
           xlim=(-0.5, len(timed) - 0.5))
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=s) for s, c in _COLORS.items()
               if any(e.verdict.status.value == s for e in timed)]
    handles.append(plt.Line2D([], [], marker="x", ls="", color="#6e7781", label="library"))
    ax.legend(handles=handles, fontsize=7, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _table(entries: list[LogEntry]) -> str:
    head = ("<tr><th>#</th><th>kernel</th><th>problem</th><th>dsl</th><th>status</th><th>reason</th>"
            "<th>confidence</th><th>LRE [95% interval]</th><th>U candidate</th><th>U library</th>"
            "<th>t candidate ms</th><th>t library ms</th><th>findings</th></tr>")
    rows = []
    for i, e in enumerate(entries, 1):
        v, m = e.verdict, e.verdict.metrics
        lre = f"{m.lre:.3g} [{m.lre_low:.3g}, {m.lre_high:.3g}]" if m else ""
        rows.append(
            f'<tr class="verdict" data-status="{_e(v.status.value)}">'
            f'<td class="num">{i}</td><td><a href="#k{e.id}">{_e(_label(e))}</a></td>'
            f"<td>{_e(_problem_label(v))}</td><td>{_e(v.dsl)}</td>"
            f'<td class="status status-{_e(v.status.value)}">{_e(v.status.value)}</td>'
            f"<td>{_e(v.reason.value if v.reason else '')}</td><td class=\"num\">{v.confidence:.2f}</td>"
            f'<td class="num">{_e(lre)}</td><td class="num">{_num(m.u_candidate if m else None)}</td>'
            f'<td class="num">{_num(m.u_library if m else None)}</td>'
            f'<td class="num">{_num(m.t_candidate_ms if m else None, 4)}</td>'
            f'<td class="num">{_num(m.t_library_ms if m else None, 4)}</td>'
            f"<td>{_e(', '.join(f.code for f in v.findings))}</td></tr>")
    return f'<table id="verdicts">{head}{"".join(rows)}</table>'


def _evidence(e: LogEntry) -> str:
    v = e.verdict
    parts = [f'<section class="kernel" id="k{e.id}"><h3>{_e(_label(e))}: '
             f'<span class="status status-{_e(v.status.value)}">{_e(v.status.value)}</span></h3>',
             f"<p>{_e(v.summary)}</p>",
             f"<p>problem {_e(_problem_label(v))}; dsl {_e(v.dsl)}; sha256 <code>{_e(v.candidate_sha256[:16])}</code>; "
             f"logged {_e(e.created_at)}</p>",
             f"<h4>feedback</h4><pre>{_e(v.feedback)}</pre>"]
    if e.generator:
        parts.append("<p>generator: " + _e(", ".join(f"{k}={val}" for k, val in sorted(e.generator.items()))) + "</p>")
    if v.failure:
        parts.append(f"<h4>failure ({_e(v.failure.stage)})</h4><pre>{_e(v.failure.message)}</pre>")
    if v.findings:
        items = "".join(f"<li><b>{_e(f.code)}</b> ({_e(f.kind)}): {_e(f.evidence)}. Fix: {_e(f.hint)}</li>"
                        for f in v.findings)
        parts.append(f"<h4>findings</h4><ul>{items}</ul>")
    n = v.numerics
    if n is not None:
        state = "checked" if n.checked else f"not checked: {n.skipped_reason}"
        copied = {True: "reference parameters copied", False: "parameter keys differ: not copied",
                  None: "no parameters"}[n.state_copied]
        rows = "".join(f"<tr><td>{_e(t.distribution)}</td><td>{'pass' if t.passed else 'fail'}</td>"
                       f"<td class=\"num\">{_num(t.normalized_error)}</td><td class=\"num\">{_num(t.max_abs_error)}</td>"
                       f"<td>{_e(t.reason.value if t.reason else '')}</td></tr>" for t in n.trials)
        parts.append(f"<h4>numerics</h4><p>{_e(state)} on {_e(n.executor)}; {_e(copied)}; "
                     f"tolerance atol {_num(n.atol)}, rtol {_num(n.rtol)}</p>")
        if rows:
            parts.append("<table><tr><th>inputs</th><th>result</th><th>normalized error</th><th>max abs error</th>"
                         f"<th>reason</th></tr>{rows}</table>")
    m, t = v.metrics, v.timing
    if m is not None and t is not None:
        parts.append(
            f"<h4>timing</h4><p>candidate median {m.t_candidate_ms:.4g} ms (p20 {t.candidate.p20_ms:.4g}, p80 "
            f"{t.candidate.p80_ms:.4g}, wall {t.candidate.wall_median_ms:.4g}), library median {m.t_library_ms:.4g} ms; "
            f"{t.candidate.reps} interleaved repetitions, L2 flush {t.l2_flush_bytes >> 20} MiB. Floor "
            f"{m.t_floor_ms:.4g} ms ({_e(m.bound)}-bound, F {m.flops:.4g}, B {m.bytes_compulsory:.4g}); "
            f"LRE {m.lre:.3g} [{m.lre_low:.3g}, {m.lre_high:.3g}], U {m.u_candidate:.3g}, library U "
            f"{m.u_library:.3g}; peaks {_e(m.peaks.source)}</p>")
    elif v.status is Status.untimed:
        parts.append("<h4>timing</h4><p>not timed</p>")
    if v.notes:
        parts.append("<h4>notes</h4><ul>" + "".join(f"<li>{_e(x)}</li>" for x in v.notes) + "</ul>")
    if v.seconds:
        parts.append("<p class=\"note\">seconds: " + _e(", ".join(f"{k} {s:.2f}" for k, s in v.seconds.items())) + "</p>")
    parts.append("</section>")
    return "".join(parts)


def render_page(batch: str | None, entries: list[LogEntry], plot: str | None, plot_note: str | None = None,
                source: str | None = None) -> str:
    """The HTML text for one batch. ``plot``: the PNG's file name, or None with ``plot_note`` saying why."""
    ranked_verdicts = rank([e.verdict for e in entries])
    order = {id(v): i for i, v in enumerate(ranked_verdicts)}
    ranked = sorted(entries, key=lambda e: order[id(e.verdict)])
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.verdict.status.value] = counts.get(e.verdict.status.value, 0) + 1
    devices = sorted({e.verdict.environment.device.name for e in entries
                      if e.verdict.environment and e.verdict.environment.device} or {"no GPU"})
    versions = sorted({e.verdict.kernelgate_version for e in entries})
    figure = (f'<img id="roofline" src="{_e(plot)}" alt="roofline plot of the timed kernels and their library ops">'
              if plot else f'<p class="note" id="roofline-note">{_e(plot_note or NOTHING_TIMED)}.</p>')
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = f"kernelgate report: {batch or 'verdicts without a batch'}"
    return (
        f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
        f"<p>{len(entries)} verdicts: " + _e(", ".join(f"{n} {s}" for s, n in sorted(counts.items()))) +
        f". Devices: {_e(', '.join(devices))}. kernelgate {_e(', '.join(versions))}. Written {_e(now)}"
        + (f" from {_e(source)}" if source else "") + ".</p>"
        "<p class=\"note\">Best first: status (accept, repair, structural, untimed, reject), then the low end of "
        "the LRE interval. LRE = t_library / t_candidate; U = t_floor / t_candidate.</p>"
        f"<h2>verdicts</h2>{_table(ranked)}<h2>roofline</h2>{figure}"
        f"<h2>evidence</h2>{''.join(_evidence(e) for e in ranked)}</body></html>")


def write_report(log: VerdictLog, batch: str | None, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/<batch>.html`` (and its roofline PNG when something was timed); returns the page."""
    entries = log.entries(batch=batch)
    if batch is not None and not entries:
        from kernelgate.errors import KernelgateError

        known = ", ".join(str(b.name) for b in log.batches()) or "none"
        raise KernelgateError(f"no verdicts of batch {batch!r} in {log.path}; batches: {known}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slug = _slug(batch)
    png = out / f"{slug}-roofline.png"
    plot, note = None, None
    try:
        drawn = plot_roofline(entries, png)
        if drawn is None:
            note = NOTHING_TIMED + " (every verdict is untimed or a reject)"
            png.unlink(missing_ok=True)
        else:
            plot = png.name
    except ImportError:
        note = "The roofline plot needs matplotlib, which is not installed here (pip install 'kernelgate[plots]')"
    page = out / f"{slug}.html"
    page.write_text(render_page(batch, entries, plot, note, source=str(log.path)), encoding="utf-8")
    return page
