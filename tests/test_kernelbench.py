"""kernelgate.adapters.kernelbench: a problem's footprint sized on the meta device, the check that names
``--shape``, shrinking a shape to fit, and the dataset folder of a checkout.

The three KernelBench problem files under tests/fixtures/kernelbench_all/KernelBench are copies
(KernelBench is MIT, its licence beside them), at their shipped shapes: a 4096 x 393216 ReLU
(6.4 GB of input) must be sized without being allocated.
"""

from __future__ import annotations

import resource
import textwrap

import pytest
from kernelgate.adapters import kernelbench as kb

from kernelgate.errors import ProblemError
from tests.conftest import FIXTURES

CHECKOUT = FIXTURES / "kernelbench_all"
RELU = CHECKOUT / "KernelBench" / "level1" / "19_ReLU.py"
CONV = CHECKOUT / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py"


def _tiny_problem(folder, name, body):
    path = folder / name
    path.write_text("import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body))
    return path


# --- footprint on the meta device -------------------------------------------------------------


def test_footprint_of_a_shipped_shape_is_sized_without_allocating_it():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    fp = kb.problem_footprint(RELU)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert fp.shape == {"batch_size": 4096, "dim": 393216}
    assert [(t.shape, t.dtype) for t in fp.inputs] == [([4096, 393216], "float32")]
    assert fp.input_bytes == fp.output_bytes == 4096 * 393216 * 4
    assert fp.parameter_bytes == 0 and fp.error is None
    assert fp.total_bytes == 2 * 4096 * 393216 * 4
    assert grown_kib < 1 << 20  # under 1 GiB: the 6.4 GB input was never made

    conv = kb.problem_footprint(CONV)
    assert conv.shape["height"] == conv.shape["width"] == 128 and conv.shape["out_channels"] == 128
    assert conv.parameter_bytes == ((128 * 64 * 3 * 3 + 128) + 128) * 4  # conv weight and bias, the extra bias
    assert [o.shape for o in conv.outputs] == [[128, 128, 126, 126]]
    assert conv.output_bytes == 128 * 128 * 126 * 126 * 4

    small = kb.problem_footprint(RELU, {"batch_size": 2, "dim": 8})
    assert small.input_bytes == 64 and small.shape == {"batch_size": 2, "dim": 8}
    with pytest.raises(ProblemError, match="no integer global rows"):
        kb.problem_footprint(RELU, {"rows": 2})


def test_footprint_reports_what_meta_cannot_run(tmp_path):
    eager = _tiny_problem(tmp_path, "cpu_inputs.py", """
        class Model(nn.Module):
            def forward(self, x, s):
                return x * s
        n = 16
        def get_inputs():
            return [torch.rand(n, device="cpu"), 3.0]
        def get_init_inputs():
            return []
    """)
    fp = kb.problem_footprint(eager)
    assert fp.input_bytes == 64 and "off the meta device" in fp.error and "cpu" in fp.error
    data_dependent = _tiny_problem(tmp_path, "item.py", """
        class Model(nn.Module):
            def forward(self, x):
                return x[: int(x.sum().item())]
        n = 16
        def get_inputs():
            return [torch.rand(n)]
        def get_init_inputs():
            return []
    """)
    fp = kb.problem_footprint(data_dependent)
    assert fp.input_bytes == 64 and fp.output_bytes is None and fp.error.startswith("forward failed on the meta device")
    broken = _tiny_problem(tmp_path, "broken.py", """
        class Model(nn.Module):
            pass
        def get_inputs():
            return [torch.rand(4).numpy()]
        def get_init_inputs():
            return []
    """)
    with pytest.raises(ProblemError, match="get_inputs\\(\\) failed on the meta device"):
        kb.problem_footprint(broken)


def test_check_footprint_names_shape_and_the_globals_and_shrinks_to_fit():
    limit = 256 << 20
    with pytest.raises(ProblemError) as caught:
        kb.check_footprint(RELU, None, limit, factor=4)
    message = str(caught.value)
    assert "--shape NAME=INT" in message and "batch_size=4096 dim=393216" in message
    assert "12.88 GB" in message and "For example: --shape" in message
    assert kb.check_footprint(RELU, {"batch_size": 16}, limit, factor=4).input_bytes == 16 * 393216 * 4

    fitted, fp = kb.shrink_shape(RELU, limit // 4)
    assert fp.total_bytes <= limit // 4 and set(fitted) <= {"batch_size", "dim"}
    assert kb.problem_footprint(RELU, fitted).total_bytes == fp.total_bytes
    # both knobs shrink in turn, neither is driven down alone
    assert fitted["batch_size"] > 1 and fitted["dim"] > 1
    # a conv problem: what it shrinks still builds and runs on meta (bias_shape is fixed at import,
    # so halving out_channels would break forward and is never chosen)
    fitted, fp = kb.shrink_shape(CONV, 64 << 20)
    assert fp.total_bytes <= 64 << 20 and fp.error is None and "out_channels" not in fitted
    assert kb.shrink_shape(RELU, 1 << 40) == ({}, kb.problem_footprint(RELU))


def test_fixture_copies_carry_kernelbench_licence():
    assert "MIT License" in (CHECKOUT / "LICENSE-KernelBench").read_text()
    assert kb.dataset_dir(CHECKOUT) == CHECKOUT / "KernelBench"
