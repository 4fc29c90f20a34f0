"""The judge's word for the gated stream (``kernelgate/worker/gpu_gate.py``): the shared page on the
CPU; the driver's wait, the judge's clock and the screen with ``stream_check`` on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelgate import Candidate, Problem, ScreenOptions, Status, screen
from kernelgate.worker.gpu_gate import CANDIDATE_WORD, JUDGE_WORD, WORDS, FlagPage
from tests.conftest import EXAMPLES

needs_gpu = pytest.mark.gpu


def test_a_word_stored_by_one_mapping_is_read_by_another(tmp_path):
    judge = FlagPage(tmp_path / "page", create=True)
    candidate = FlagPage(tmp_path / "page", create=False)  # as the candidate's process maps it
    assert (tmp_path / "page").stat().st_size == 4 * WORDS
    assert int(candidate.words[CANDIDATE_WORD]) == 0
    judge.store(CANDIDATE_WORD, 7)
    judge.store(JUDGE_WORD, 9)
    assert int(candidate.words[CANDIDATE_WORD]) == 7 and int(candidate.words[JUDGE_WORD]) == 9


@needs_gpu
def test_the_judges_own_gated_round_trip_waits_for_its_word(tmp_path):
    from kernelgate.worker.gpu_gate import JudgeGate

    gate = JudgeGate(tmp_path)
    try:
        x = torch.randn(1 << 22, device="cuda")
        y = torch.empty_like(x)
        torch.mul(x, 2.0, out=y)  # loaded before any wait (lazy module loading)
        torch.cuda.synchronize()
        empty = gate.library_overhead(10.0)
        assert 0 < empty < 5.0
        ms, plain = gate.time_own(lambda: torch.mul(x, 2.0, out=y), 10.0)
        assert not plain and ms > 0
        assert torch.equal(y, x * 2.0)
    finally:
        gate.close()


@needs_gpu
def test_an_honest_kernel_passes_the_gated_stream():
    source = Path(EXAMPLES / "triton" / "rowsum_good.py").read_text()
    verdict = screen(Candidate(source=source), Problem.file(str(EXAMPLES / "problems" / "rowsum.py")),
                     options=ScreenOptions(stream_check=True))
    assert verdict.status is not Status.reject, verdict.summary
    timing = verdict.timing
    assert timing is not None and timing.stream_ms is not None and timing.library_stream_ms is not None
    assert not any("judge-clocked stream off" in note for note in verdict.notes), verdict.notes
