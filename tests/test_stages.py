"""The judge's stages: the rules that read what the candidate's process reports."""

from __future__ import annotations

import torch

from kernelgate.models import Problem, Reason
from kernelgate.problems import build_problem
from kernelgate.worker.protocol import CallReply
from kernelgate.worker.stages import _meta_failure, _other_shape
from tests.conftest import FIXTURES

REF = torch.zeros(4, 8)


def _reply(**meta) -> CallReply:
    base = {"type_name": "torch.Tensor", "plain_tensor": True, "shape": [4, 8], "dtype": "float32", "device": "cpu"}
    return CallReply.model_validate({"type": "call", "meta": {**base, **meta}, "copied": True})


def test_an_honest_output_passes_the_meta_rules():
    assert _meta_failure("t", _reply(), REF) is None


def test_meta_rules_name_the_reason():
    assert _meta_failure("t", _reply(plain_tensor=False, type_name="x.Lazy"), REF).reason is Reason.wrong_output_type
    assert _meta_failure("t", _reply(shape=[8, 4]), REF).reason is Reason.wrong_shape
    assert _meta_failure("t", _reply(dtype="float16"), REF).reason is Reason.wrong_dtype
    assert _meta_failure("t", _reply(strided=False), REF).reason is Reason.wrong_output_type
    no_copy = CallReply.model_validate({**_reply().model_dump(), "copied": False})
    assert _meta_failure("t", no_copy, REF).reason is Reason.wrong_output_type
    assert _meta_failure("t", CallReply(), REF).reason is Reason.wrong_output_type


def test_a_kernelbench_file_is_tried_at_a_shape_off_the_usual_tiles():
    path = FIXTURES / "kernelbench_all" / "KernelBench" / "level1" / "40_LayerNorm.py"
    spec = Problem.file(str(path), shape={"batch_size": 4, "features": 4, "dim1": 8, "dim2": 8})
    other = _other_shape(spec, build_problem(spec, torch.device("cpu"), 0))
    assert other is not None
    changed = {k: v for k, v in other.shape.items() if spec.shape.get(k) != v}
    assert list(changed) == ["batch_size"]  # the others size the LayerNorm's parameters
    assert changed["batch_size"] % 8 != 0


def test_a_catalogue_op_with_a_literal_shape_branch_is_tried_one_larger():
    spec = Problem.op("rowsum", rows=16, cols=256)
    other = _other_shape(spec, build_problem(spec, torch.device("cpu"), 0))
    assert other.shape == {"rows": 17, "cols": 257}
