"""The text a generator gets back: one piece of advice per reject reason, the evidence's last lines."""

from __future__ import annotations

import pytest

from kernelgate.feedback import _REJECT_ADVICE, write_feedback, write_summary
from kernelgate.models import Failure, Finding, Reason, Status


@pytest.mark.parametrize("reason", list(Reason))
def test_every_reject_reason_has_advice(reason):
    text = write_feedback(Status.reject, reason, Failure(reason=reason, message="line 3: x\nBoom", stage="numerics"),
                          None, [])
    assert text.startswith(f"Rejected ({reason.value}). ") and _REJECT_ADVICE[reason] in text and "Boom" in text


def test_only_the_last_four_lines_of_the_evidence_are_shown():
    message = "\n".join(f"line {i}" for i in range(10))
    text = write_feedback(Status.reject, Reason.crash, Failure(reason=Reason.crash, message=message, stage="run"),
                          None, [])
    assert "line 9" in text and "line 5" not in text


def test_untimed_feedback_names_repairable_findings_once():
    finding = Finding(code="scalar_global_loads", kind="repairable", evidence="1 ld.global", hint="load blocks")
    text = write_feedback(Status.untimed, None, None, None, [finding, finding])
    assert text.count("scalar_global_loads") == 1 and text.startswith("Correct on the checks that could run")


def test_summary_of_a_reject_names_the_reason():
    assert write_summary(Status.reject, Reason.timing_interference, None, "k") == "k: reject (timing_interference)"
