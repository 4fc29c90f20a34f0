"""Reranking: status first, then the conservative LRE (low end of the interval)."""

from __future__ import annotations

from kernelgate.models import Reason, Status
from kernelgate.rank import STATUS_ORDER, best, rank, rank_key
from kernelgate.testing import FakeRunner, fake_measurement
from tests.canned import verdict, scaled


def _untimed(name):
    m = fake_measurement(None)
    m.timing = None
    from kernelgate.gate import screen
    from kernelgate.models import Candidate, Problem
    from tests.canned import SOURCE

    return screen(Candidate(source=SOURCE.format(tag=name), entry="layernorm", name=name),
                  Problem.op("layernorm", rows=4096, cols=4096), runner=FakeRunner(m))


def test_status_order_then_lre():
    fast, close, slow = verdict("fast", scaled(0.8)), verdict("close", scaled(1.05)), verdict("slow", scaled(3.0))
    wrong = verdict("wrong", None, failure=Reason.numerics_mismatch)
    untimed = _untimed("untimed")
    assert (fast.status, close.status, slow.status, untimed.status) == (
        Status.accept, Status.accept, Status.repair, Status.untimed)
    ranked = rank([wrong, untimed, slow, close, fast])
    assert [v.candidate_name for v in ranked] == ["fast", "close", "slow", "untimed", "wrong"]
    assert STATUS_ORDER[0] is Status.accept and STATUS_ORDER[-1] is Status.reject
    assert best([wrong, untimed]) is untimed and best([wrong]) is None and best([]) is None


def test_low_end_of_interval_beats_a_higher_but_noisier_estimate():
    steady = verdict("steady", scaled(0.95))  # LRE ~1.05, tight interval
    noisy_ms = [0.020, 0.060, 0.021, 0.058, 0.022, 0.059, 0.024]  # median 0.024 ms: LRE ~1.46, wide interval
    noisy = verdict("noisy", noisy_ms)
    assert noisy.metrics.lre > steady.metrics.lre and noisy.metrics.lre_low < steady.metrics.lre_low
    assert [v.candidate_name for v in rank([noisy, steady])][0] == "steady"
    assert rank_key(steady) < rank_key(noisy)


def test_equal_keys_keep_input_order():
    a, b = verdict("a", None, failure=Reason.crash), verdict("b", None, failure=Reason.crash)
    assert [v.candidate_name for v in rank([b, a])] == ["b", "a"]
