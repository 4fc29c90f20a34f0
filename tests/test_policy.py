"""Tests for kernelgate.policy.decide: the two screens, explanations, timing rejects, thresholds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kernelgate.hardware import SPEC_TABLE, MathMode
from kernelgate.models import Finding, Metrics, Reason, Status
from kernelgate.policy import DEFAULT_POLICY, Policy, StreamClock, decide

PEAKS = SPEC_TABLE["H200-SXM-141GB"]


def _metrics(lre: float = 0.9, lre_low: float | None = None, lre_high: float | None = None, u: float = 0.5,
             u_physics: float | None = None, t_candidate_ms: float = 1.0, bound: str = "memory") -> Metrics:
    lre_low = lre * 0.95 if lre_low is None else lre_low
    lre_high = lre * 1.05 if lre_high is None else lre_high
    return Metrics(t_candidate_ms=t_candidate_ms, t_library_ms=lre * t_candidate_ms, lre=lre, lre_low=lre_low,
                   lre_high=lre_high, t_floor_ms=u * t_candidate_ms if u > 0 else 0.004, u_candidate=u,
                   u_library=u / lre, u_physics=u if u_physics is None else u_physics, bound=bound,
                   flops=1e6, bytes_compulsory=1e9, peaks=PEAKS, math_mode=MathMode.fp32)


REPAIRABLE = Finding(code="tiny_block", kind="repairable", evidence="num_warps=1", hint="bigger blocks")
STRUCTURAL = Finding(code="codegen", kind="structural", evidence="compiler", hint="none")
INFO = Finding(code="note", kind="info", evidence="e", hint="h")


# --- the two screens -------------------------------------------------------------------------


def test_accept_when_lre_and_u_clear_thresholds():
    d = decide(_metrics(lre=0.9, u=0.5), [], numerics_checked=True)
    assert d.status is Status.accept
    assert d.reason is None
    assert d.confidence == pytest.approx(0.9)
    assert d.findings == []


def test_accept_at_exact_thresholds():
    d = decide(_metrics(lre=0.8, lre_low=0.8, lre_high=0.9, u=0.3), [], numerics_checked=True)
    assert d.status is Status.accept


def test_accept_keeps_findings():
    d = decide(_metrics(lre=1.2, u=0.6), [REPAIRABLE], numerics_checked=True)
    assert d.status is Status.accept
    assert d.findings == [REPAIRABLE]


def test_repair_when_lre_low_and_repairable_finding():
    d = decide(_metrics(lre=0.4, u=0.5), [REPAIRABLE], numerics_checked=True)
    assert d.status is Status.repair
    assert d.reason is None
    assert d.confidence == pytest.approx(0.8)
    assert d.findings == [REPAIRABLE]


def test_repair_wins_over_structural_when_both_found():
    d = decide(_metrics(lre=0.4), [STRUCTURAL, REPAIRABLE], numerics_checked=True)
    assert d.status is Status.repair


def test_flagged_without_finding_is_repair_with_unexplained_gap():
    d = decide(_metrics(lre=0.4, u=0.5), [], numerics_checked=True)
    assert d.status is Status.repair
    assert d.confidence <= 0.3
    codes = [f.code for f in d.findings]
    assert codes == ["unexplained_gap"]
    gap = d.findings[0]
    assert gap.kind == "info"
    assert "0.40" in gap.evidence and "0.8" in gap.evidence


def test_info_finding_does_not_explain_a_gap():
    d = decide(_metrics(lre=0.4), [INFO], numerics_checked=True)
    assert d.status is Status.repair
    assert d.confidence <= 0.3
    assert [f.code for f in d.findings] == ["note", "unexplained_gap"]


def test_structural_when_only_structural_finding():
    d = decide(_metrics(lre=0.4, u=0.5), [STRUCTURAL], numerics_checked=True)
    assert d.status is Status.structural
    assert d.findings == [STRUCTURAL]
    assert 0 < d.confidence < 0.9


def test_compute_bound_near_the_library_without_finding_is_structural():
    d = decide(_metrics(lre=0.6, u=0.5, bound="compute"), [], numerics_checked=True)
    assert d.status is Status.structural
    assert [f.code for f in d.findings] == ["codegen_gap"] and d.findings[0].kind == "structural"
    assert "0.60" in d.findings[0].evidence
    # far behind the library, or memory-bound, or with a repairable defect: not structural
    assert decide(_metrics(lre=0.2, u=0.5, bound="compute"), [], numerics_checked=True).status is Status.repair
    assert decide(_metrics(lre=0.6, u=0.5), [], numerics_checked=True).status is Status.repair
    assert decide(_metrics(lre=0.6, u=0.5, bound="compute"), [REPAIRABLE], numerics_checked=True).status is Status.repair
    # the threshold is the policy's
    strict = Policy(structural_lre_min=0.7)
    assert decide(_metrics(lre=0.6, u=0.5, bound="compute"), [], numerics_checked=True, policy=strict).status \
        is Status.repair


def test_memory_access_findings_do_not_explain_a_compute_bound_gap():
    loads = Finding(code="scalar_global_loads", kind="repairable", evidence="ld.global.b16", hint="vectorize")
    d = decide(_metrics(lre=0.6, u=0.5, bound="compute"), [loads], numerics_checked=True)
    assert d.status is Status.structural and [f.code for f in d.findings] == ["scalar_global_loads", "codegen_gap"]
    assert decide(_metrics(lre=0.6, u=0.5), [loads], numerics_checked=True).status is Status.repair  # memory-bound
    assert decide(_metrics(lre=0.6, u=0.5, bound="compute"), [loads, REPAIRABLE],
                  numerics_checked=True).status is Status.repair


def test_flagged_by_utilization_alone_even_when_lre_above_one():
    # beats a weak library op by 2x but uses 10% of the roofline
    m = _metrics(lre=2.0, lre_low=1.8, lre_high=2.2, u=0.1)
    d = decide(m, [], numerics_checked=True)
    assert d.status is Status.repair
    assert [f.code for f in d.findings] == ["unexplained_gap"]
    assert decide(m, [REPAIRABLE], numerics_checked=True).status is Status.repair
    assert decide(m, [STRUCTURAL], numerics_checked=True).status is Status.structural


def test_just_below_u_min_is_flagged():
    assert decide(_metrics(lre=1.0, u=0.299), [], numerics_checked=True).status is Status.repair


def test_straddling_interval_lowers_confidence():
    clear_accept = decide(_metrics(lre=0.9, lre_low=0.85, lre_high=0.95), [], numerics_checked=True)
    straddle_accept = decide(_metrics(lre=0.85, lre_low=0.75, lre_high=0.95), [], numerics_checked=True)
    assert straddle_accept.status is Status.accept
    assert straddle_accept.confidence < clear_accept.confidence

    clear_repair = decide(_metrics(lre=0.5, lre_low=0.45, lre_high=0.55), [REPAIRABLE], numerics_checked=True)
    straddle_repair = decide(_metrics(lre=0.75, lre_low=0.7, lre_high=0.85), [REPAIRABLE], numerics_checked=True)
    assert straddle_repair.status is Status.repair
    assert straddle_repair.confidence < clear_repair.confidence


# --- timing rejects --------------------------------------------------------------------------


def test_exceeds_roofline_reject():
    d = decide(_metrics(lre=50.0, u=0.9, u_physics=1.2), [], numerics_checked=True)
    assert d.status is Status.reject
    assert d.reason is Reason.exceeds_roofline
    assert d.message and "1.20" in d.message


def test_u_physics_at_limit_is_not_rejected():
    d = decide(_metrics(lre=1.0, u=1.0, u_physics=1.1), [], numerics_checked=True)
    assert d.status is Status.accept


def test_unsynchronized_work_reject():
    # t_candidate 1 ms: limit is 1.5 * 1 + max(1.5, 3 x the resolution) ms of wall excess
    d = decide(_metrics(t_candidate_ms=1.0), [], numerics_checked=True, wall_excess_ms=10.0)
    assert d.status is Status.reject
    assert d.reason is Reason.unsynchronized_work
    assert "10" in d.message


def test_wall_excess_within_limit_is_fine():
    # 1.5 x 1.0 ms + the 2.5 ms floor = 4.0 ms
    d = decide(_metrics(t_candidate_ms=1.0), [], numerics_checked=True, wall_excess_ms=3.9)
    assert d.status is Status.accept
    d = decide(_metrics(t_candidate_ms=1.0), [], numerics_checked=True, wall_excess_ms=4.1)
    assert d.reason is Reason.unsynchronized_work


def test_the_measured_resolution_widens_the_wall_check():
    # resolution 1.0 ms: the floor is 3 x 1.0 = 3.0 ms (over the 2.5 ms default), so 1.5 + 3.0 = 4.5 ms is the limit
    m = _metrics(t_candidate_ms=1.0)
    assert decide(m, [], numerics_checked=True, wall_excess_ms=4.4, wall_resolution_ms=1.0).status is Status.accept
    d = decide(m, [], numerics_checked=True, wall_excess_ms=4.6, wall_resolution_ms=1.0)
    assert d.reason is Reason.unsynchronized_work


def _stream(candidate_ms: float, cpu_ms: float = 0.01, library_ms: float = 0.05, library_event_ms: float = 0.05):
    return StreamClock(calls=200, candidate_ms=candidate_ms, candidate_cpu_ms=cpu_ms, library_ms=library_ms,
                       library_event_ms=library_event_ms)


def test_a_stream_slower_than_the_claim_is_unsynchronized_work():
    # claim 0.05 ms; the judge's clock over 200 calls back to back saw 0.2 ms per call
    m = _metrics(t_candidate_ms=0.05)
    d = decide(m, [], numerics_checked=True, stream=_stream(0.2))
    assert d.status is Status.reject and d.reason is Reason.unsynchronized_work
    assert "200 calls back to back" in d.message and "0.2 ms per call" in d.message
    # limit: 1.15 x 0.05 + 0.002 = 0.0595 ms
    assert decide(m, [], numerics_checked=True, stream=_stream(0.059)).status is Status.accept
    assert decide(m, [], numerics_checked=True, stream=_stream(0.060)).reason is Reason.unsynchronized_work


def test_the_librarys_own_stream_moves_what_the_claim_explains():
    m = _metrics(t_candidate_ms=0.05)
    # the library ran 1.6x slower back to back than by its events: the claim explains 0.08 ms
    slow_library = _stream(0.09, library_ms=0.08, library_event_ms=0.05)
    assert decide(m, [], numerics_checked=True, stream=slow_library).status is Status.accept
    assert decide(m, [], numerics_checked=True,
                  stream=_stream(0.095, library_ms=0.08, library_event_ms=0.05)).reason is Reason.unsynchronized_work
    # the library slower by a fixed 0.1 ms per call (its output's copy into the slot): a claim of
    # 0.025 ms explains 0.025 + 0.1 ms, not only 0.025 x 3: the more lenient of the two counts
    fast = _metrics(t_candidate_ms=0.025)
    copy_bound = _stream(0.14, library_ms=0.15, library_event_ms=0.05)
    assert decide(fast, [], numerics_checked=True, stream=copy_bound).status is Status.accept
    assert decide(fast, [], numerics_checked=True, stream=_stream(0.15, library_ms=0.15,
                                                                  library_event_ms=0.05)).reason is Reason.unsynchronized_work
    # a library faster back to back (launch gaps gone) tightens the check below the claim too
    fast_library = _stream(0.05, library_ms=0.04, library_event_ms=0.05)
    assert decide(m, [], numerics_checked=True, stream=fast_library).reason is Reason.unsynchronized_work


def test_a_claim_forged_by_a_fifth_is_caught_by_the_stream():
    # c8_control_claim_only on an H100 (2026-12-06, benchmarks/results/redteam_stream_h100.json): it claimed
    # 0.02994 ms; the gated stream saw 0.03515 ms per call, where the library ran at 0.83x its events
    m = _metrics(t_candidate_ms=0.02994)
    forged = _stream(0.03515, cpu_ms=0.19, library_ms=0.032352, library_event_ms=0.03896)
    assert decide(m, [], numerics_checked=True, stream=forged).reason is Reason.unsynchronized_work
    # the same claim, told the truth by the stream (0.83 x 0.02994)
    honest = _stream(0.0249, cpu_ms=0.19, library_ms=0.032352, library_event_ms=0.03896)
    assert decide(m, [], numerics_checked=True, stream=honest).status is Status.accept


def test_cpu_time_explains_nothing_of_a_gated_stream_by_default():
    m = _metrics(t_candidate_ms=0.01)
    # every call was enqueued before the judge's clock started: CPU burnt per call excuses nothing
    spinning = _stream(0.4, cpu_ms=0.45)
    assert decide(m, [], numerics_checked=True, stream=spinning).reason is Reason.unsynchronized_work
    # a policy may still grant an excuse, capped
    lenient = Policy(stream_cpu_cap_ms=0.5)
    assert decide(m, [], numerics_checked=True, stream=spinning, policy=lenient).status is Status.accept
    assert decide(m, [], numerics_checked=True, stream=_stream(2.0, cpu_ms=2.0),
                  policy=lenient).reason is Reason.unsynchronized_work


def test_a_stream_below_the_physical_floor_did_its_work_before_the_word():
    # claim 1.0 ms, physical floor 0.5 ms (u_physics 0.5): a stream of 0.4 ms per call is impossible
    m = _metrics(t_candidate_ms=1.0, u=0.5)
    d = decide(m, [], numerics_checked=True, stream=_stream(0.4))
    assert d.reason is Reason.unsynchronized_work and "below the physical floor" in d.message
    # at the floor's limit (floor / stream = u_impossible, 1.1) it stands
    assert decide(m, [], numerics_checked=True, stream=_stream(0.5 / 1.1 + 1e-6)).status is Status.accept
    # a launch-bound problem's floor is a launch latency, not physics: no such check
    launch = _metrics(t_candidate_ms=1.0, u=0.5, bound="launch")
    assert decide(launch, [], numerics_checked=True, stream=_stream(0.4)).status is Status.accept


def test_timing_rejects_ignore_findings():
    d = decide(_metrics(u_physics=2.0), [REPAIRABLE], numerics_checked=True)
    assert d.status is Status.reject and d.reason is Reason.exceeds_roofline


# --- nothing timed ---------------------------------------------------------------------------


def test_untimed_when_no_metrics():
    checked = decide(None, [], numerics_checked=True)
    unchecked = decide(None, [], numerics_checked=False)
    assert checked.status is Status.untimed and unchecked.status is Status.untimed
    assert checked.reason is None
    assert unchecked.confidence < checked.confidence


def test_untimed_with_only_info_or_structural_findings():
    d = decide(None, [INFO, STRUCTURAL], numerics_checked=True)
    assert d.status is Status.untimed
    assert d.findings == [INFO, STRUCTURAL]


def test_repair_when_no_metrics_but_repairable_finding():
    d = decide(None, [REPAIRABLE], numerics_checked=False)
    assert d.status is Status.repair
    assert d.findings == [REPAIRABLE]
    assert not any(f.code == "unexplained_gap" for f in d.findings)


def test_no_metrics_ignores_wall_excess():
    assert decide(None, [], numerics_checked=True, wall_excess_ms=1e6).status is Status.untimed


# --- custom policies -------------------------------------------------------------------------


def test_custom_lre_min_changes_outcome():
    m = _metrics(lre=0.6, lre_low=0.55, lre_high=0.65, u=0.5)
    assert decide(m, [], numerics_checked=True).status is Status.repair
    assert decide(m, [], numerics_checked=True, policy=Policy(lre_min=0.5)).status is Status.accept


def test_custom_u_min_changes_outcome():
    m = _metrics(lre=1.0, u=0.2)
    assert decide(m, [], numerics_checked=True).status is Status.repair
    assert decide(m, [], numerics_checked=True, policy=Policy(u_min=0.1)).status is Status.accept


def test_custom_wall_excess_policy():
    m = _metrics(t_candidate_ms=1.0)
    strict = Policy(wall_excess_factor=1.2, wall_excess_floor_ms=0.0)
    assert decide(m, [], numerics_checked=True, wall_excess_ms=1.6).status is Status.accept
    assert decide(m, [], numerics_checked=True, wall_excess_ms=1.3).status is Status.accept
    assert decide(m, [], numerics_checked=True, wall_excess_ms=1.3, policy=strict).reason is Reason.unsynchronized_work


def test_custom_u_impossible():
    m = _metrics(lre=1.0, u=0.9, u_physics=1.3)
    assert decide(m, [], numerics_checked=True).reason is Reason.exceeds_roofline
    assert decide(m, [], numerics_checked=True, policy=Policy(u_impossible=1.5)).status is Status.accept


def test_default_policy_values():
    assert DEFAULT_POLICY == Policy()
    assert (DEFAULT_POLICY.lre_min, DEFAULT_POLICY.u_min, DEFAULT_POLICY.u_impossible) == (0.8, 0.3, 1.1)


@pytest.mark.parametrize("kwargs", [
    {"lre_min": 0},
    {"lre_min": -0.5},
    {"u_impossible": 1.0},          # must exceed 1 (and so u_min)
    {"u_impossible": 0.2},          # below the default u_min
    {"u_min": 1.2},                 # u_min at most 1
    {"u_min": -0.1},
    {"wall_excess_factor": 1.0},
    {"wall_excess_floor_ms": -1.0},
    {"colour": "red"},              # extra fields forbidden
])
def test_policy_validation_errors(kwargs):
    with pytest.raises(ValidationError):
        Policy(**kwargs)
