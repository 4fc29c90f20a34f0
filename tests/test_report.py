"""HTML reports: the table, the evidence, escaping, the roofline PNG, and what a person sees in Chromium."""

from __future__ import annotations

import builtins
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgate.models import Reason
from kernelgate.report import NOTHING_TIMED, write_report
from kernelgate.store import VerdictLog
from kernelgate.testing import FakeRunner, fake_measurement
from tests.canned import SOURCE, scaled, verdict

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _untimed(name):
    from kernelgate.gate import screen
    from kernelgate.models import Candidate, Problem

    m = fake_measurement(None)
    m.environment.device = None
    return screen(Candidate(source=SOURCE.format(tag=name), entry="layernorm", name=name),
                  Problem.op("layernorm", rows=4096, cols=4096), runner=FakeRunner(m))


@pytest.fixture
def log(tmp_path):
    log = VerdictLog(tmp_path / "log.sqlite")
    log.add(verdict("slow<script>", scaled(3.0)), batch="gpu run", generator={"model": "fake"})
    log.add(verdict("fast", scaled(0.8)), batch="gpu run")
    log.add(verdict("wrong", None, failure=Reason.numerics_mismatch), batch="gpu run")
    log.add(_untimed("cpu-only"), batch="cpu")
    return log


def _rows(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr class="verdict" data-status="(\w+)"><td class="num">\d+</td><td><a href="#k\d+">([^<]*)</a>',
                      page)


def test_page_ranks_escapes_and_shows_evidence(log, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the roofline PNG cannot be drawn")
    page = write_report(log, "gpu run", tmp_path / "out")
    assert page.name == "gpu_run.html"
    text = page.read_text()
    assert _rows(text) == [("accept", "fast"), ("repair", "slow&lt;script&gt;"), ("reject", "wrong")]
    assert "<script>" not in text  # the candidate's name and the failure message are escaped
    assert "max |c - r| = 3.2 &lt;b&gt;" in text
    assert "unexplained_gap" in text and "model=fake" in text and "Rejected (numerics_mismatch)" in text
    png = tmp_path / "out" / "gpu_run-roofline.png"
    assert f'src="{png.name}"' in text and png.read_bytes()[:8] == PNG_MAGIC


def test_nothing_timed_says_so_and_draws_nothing(log, tmp_path):
    page = write_report(log, "cpu", tmp_path / "out")
    text = page.read_text()
    assert NOTHING_TIMED in text and "<img" not in text
    assert _rows(text) == [("untimed", "cpu-only")] and "not timed" in text
    assert not list((tmp_path / "out").glob("*.png"))


def test_without_matplotlib_the_page_says_so(log, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    text = write_report(log, "gpu run", tmp_path / "out").read_text()
    assert "needs matplotlib" in text and "<img" not in text and len(_rows(text)) == 3


def test_unknown_batch_is_an_error(log, tmp_path):
    from kernelgate.errors import KernelgateError

    with pytest.raises(KernelgateError, match="batches: gpu run, cpu"):
        write_report(log, "nope", tmp_path / "out")


def _chromium() -> str | None:
    return shutil.which("chromium") or next((p for p in ("/usr/bin/chromium",) if Path(p).exists()), None)


def test_page_renders_in_headless_chromium(log, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: the roofline PNG cannot be drawn")
    browser = _chromium()
    if browser is None:
        pytest.skip("SKIPPED: headless Chromium is not installed (Debian: apt-get install -y chromium; "
                    ".ci/run installs it where apt works), so the rendered page was not checked")
    page = write_report(log, "gpu run", tmp_path / "out")
    # A copy with one script that records whether the PNG loaded: the report itself has none.
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", (
        "<script>window.addEventListener('load', () => { const i = document.getElementById('roofline');"
        " document.body.setAttribute('data-png', i ? i.complete + ':' + i.naturalWidth : 'none'); });"
        "</script></body>")))
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _rows(dom) == [("accept", "fast"), ("repair", "slow&lt;script&gt;"), ("reject", "wrong")]
    width = re.search(r'data-png="true:(\d+)"', dom)
    assert width and int(width.group(1)) > 100, re.search(r"<body[^>]*>", dom).group(0)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == PNG_MAGIC
