"""Static integrity rules on sources alone, and the op-share rule on recorded calls."""

from __future__ import annotations

import pytest

from kernelgate import Reason
from kernelgate.integrity import heavy_ops, scan, static_failure
from tests.conftest import EXAMPLES, FIXTURES


def _rules(source: str) -> dict[str, bool]:
    return {h.rule: h.rejects for h in scan(source)}


@pytest.mark.parametrize("source, rule, rejects", [
    ("import torch\ntorch.cuda.synchronize = lambda: None\n", "harness_patch", True),
    ("from torch.cuda import Event\nEvent.elapsed_time = None\n", "harness_patch", True),
    ("import time\nsetattr(time, 'perf_counter', lambda: 0)\n", "harness_patch", True),
    ("import kernelgate.timing\n", "harness_import", True),
    ("import sys\nm = sys.modules\n", "sys_modules", True),
    ("def f(g):\n    g.__code__ = (lambda: 0).__code__\n", "code_swap", True),
    ("import inspect\ndef f():\n    return inspect.stack()\n", "introspection", True),
    ("import torch\ntorch.set_float32_matmul_precision('medium')\n", "settings_change", True),
    ("import torch\ndef f(x):\n    s = torch.cuda.Stream()\n", "side_stream", False),
    ("import torch\ns = torch._C._CudaStreamBase(priority=0)\n", "raw_stream", True),
    ("import threading\n", "threads", False),
    ("import os\ndef f():\n    os.fork()\n", "process_spawn", False),
    ("C = {}\ndef f(x):\n    C[x.data_ptr()] = x\n", "output_cache", False),
    ("import torch.nn.functional as F\ndef f(x):\n    return F.softmax(x, -1)\n", "library_op", False),
    ("def f(x):\n    return x @ x\n", "library_op", False),
    ("import os\nv = os.environ.get('X')\n", "environment_access", False),
    ("def f(x):\n    open('/tmp/a', 'w')\n", "file_write", False),
    ("def f(x):\n    if x.shape[1] == 4096:\n        pass\n", "shape_literal", False),
])
def test_rule_fires_with_its_severity(source, rule, rejects):
    rules = _rules(source)
    assert rule in rules, rules
    assert rules[rule] is rejects


def test_evidence_names_the_line():
    failure = static_failure(scan("import torch\n\n\ntorch.allclose = lambda *a: True\n"))
    assert failure.reason is Reason.tampering and "line 4: torch.allclose = lambda *a: True" in failure.message


@pytest.mark.parametrize("path", sorted((EXAMPLES / "triton").glob("*.py")) + [FIXTURES / "rowsum_good.py"],
                         ids=lambda p: p.name)
def test_honest_kernels_trip_no_rejecting_rule(path):
    assert static_failure(scan(path.read_text())) is None


def test_unparsable_source_has_no_hits():
    assert scan("def (:\n") == [] and scan("\x00") == []


def test_heavy_ops_ignore_small_operands():
    calls = [("sum", 16 * 4), ("sum", 4096), ("add", 100)]
    assert heavy_ops(calls, 4096) == ["sum on 4,160 elements in all", "add on 100 elements in all"]
    assert heavy_ops([("sum", 64)], 4096) == []


def test_heavy_ops_add_up_slices_of_the_work():
    thirds = [("sum", 1366), ("sum", 1365), ("sum", 1365)]  # each under half the input, together all of it
    assert heavy_ops(thirds, 4096) == ["sum on 4,096 elements in all"]


def test_op_recorder_notes_reads_of_device_tensors_into_host_memory():
    """Host work reads device data to the host; a "meta" tensor stands in for a device one here."""
    import torch

    from kernelgate.integrity import OpRecorder

    device = torch.empty(64, 32, device="meta")
    host = torch.empty(64, 32)
    with OpRecorder() as recorder:
        for read in (lambda: device.cpu(), lambda: device.to("cpu"), lambda: device.to(device=torch.device("cpu")),
                     lambda: host.copy_(device), lambda: device.tolist()):
            try:
                read()
            except (NotImplementedError, RuntimeError):
                pass  # a meta tensor has no data to copy out; the read was asked for all the same
        device.to(torch.float16)   # stays on its device
        host.cpu()                 # already on the host
        host.tolist()
    assert [name for name, _ in recorder.to_host] == ["cpu", "to", "to", "copy_", "tolist"]
    assert all(size == 64 * 32 for _, size in recorder.to_host)
