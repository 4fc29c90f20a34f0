"""kernelgate.errors: the hierarchy (one base to catch them all), the messages and the plug-in name
PluginError carries, that the package exports them, and that errors raised by the gate are these."""

from __future__ import annotations

import pickle

import pytest

import kernelgate
from kernelgate import errors
from kernelgate.errors import (
    CalibrationError,
    KernelgateError,
    NoGPUError,
    PluginError,
    ProblemError,
    WorkerError,
)

SIMPLE = [ProblemError, NoGPUError, CalibrationError, WorkerError]


def test_every_error_is_a_kernelgate_error_and_exported():
    assert set(errors.__all__) == {"KernelgateError", "ProblemError", "PluginError", "NoGPUError",
                                   "CalibrationError", "WorkerError"}
    assert issubclass(KernelgateError, Exception) and not issubclass(KernelgateError, (ValueError, RuntimeError))
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, KernelgateError)
        assert getattr(kernelgate, name) is cls  # `from kernelgate import ProblemError` works
    # siblings, not one another's subclasses: catching one does not catch the others
    for cls in SIMPLE + [PluginError]:
        assert [other for other in SIMPLE + [PluginError] if issubclass(cls, other)] == [cls]


@pytest.mark.parametrize("cls", SIMPLE)
def test_simple_errors_carry_their_message(cls):
    with pytest.raises(KernelgateError, match="^the problem file is gone$") as info:
        raise cls("the problem file is gone")
    assert type(info.value) is cls and str(info.value) == "the problem file is gone"
    again = pickle.loads(pickle.dumps(info.value))  # e.g. back from a Ray task
    assert type(again) is cls and str(again) == "the problem file is gone"


def test_plugin_error_names_the_plugin():
    exc = PluginError("tritonx", "launch is not callable")
    assert exc.plugin == "tritonx"
    assert str(exc) == "DSL plug-in 'tritonx': launch is not callable"
    assert exc.args == ("DSL plug-in 'tritonx': launch is not callable",)
    with pytest.raises(KernelgateError):
        raise exc


def test_plugin_error_survives_pickling():
    again = pickle.loads(pickle.dumps(PluginError("tritonx", "broken")))
    assert again.plugin == "tritonx" and str(again) == "DSL plug-in 'tritonx': broken"


def test_the_gate_raises_these_for_caller_mistakes(tmp_path):
    from kernelgate.adapters.kernelbench import problem
    from kernelgate.dsl import get_plugin

    with pytest.raises(PluginError) as info:
        get_plugin("no-such-dsl")
    assert info.value.plugin == "no-such-dsl" and "no such DSL" in str(info.value)
    with pytest.raises(ProblemError, match="problem file not found"):
        problem(tmp_path / "missing.py")
