"""Turn a ``Problem`` into what the worker runs: the reference, fresh inputs, and the cost.

Both problem sources (a ``reference_ops`` entry, a KernelBench-style file) become one
``BuiltProblem``. Runs inside the worker process only: it imports problem files and touches the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from kernelgate.errors import ProblemError
from kernelgate.hardware import MathMode
from kernelgate.models import Cost, Problem
from kernelgate.numerics import TOLERANCES, Tolerance

__all__ = ["BuiltProblem", "build_problem", "instantiate", "DISTRIBUTIONS", "draw", "randomize_state"]

DISTRIBUTIONS = ("uniform01", "normal", "wide_scale", "normal_offset", "large_offset")
"""Input distributions, one per numerics trial: KernelBench's own [0, 1) first, then signed draws,
draws scaled far from 1, and draws shifted a little and a lot: they expose sign bugs, overflow
and underflow (a softmax without its max subtracted), and cancellation (a one-pass variance)."""

WIDE_RANGES = {torch.float32: {"scale": (-3.0, 3.0), "offset": (2.0, 4.0)},
               torch.float16: {"scale": (-2.0, 2.0), "offset": (1.0, 2.0)},
               torch.bfloat16: {"scale": (-2.0, 2.0), "offset": (1.0, 2.0)}}
"""Decades for ``wide_scale`` (x = N(0,1) * 10^u) and ``large_offset`` (x = N(0,1) + 10^u), u drawn
per tensor in the top half-decade of the range (so every screen meets the hard end of it): fp32 scales 1e-3 to 1e3 and offsets 1e2 to 1e4; the half
types less, where a wider range leaves their own precision (fp16 holds 65504 at most). A trial
whose reference is not finite at all is skipped (``check_trial_output`` ignores the elements
where it is not finite)."""

_MODES = {torch.float32: MathMode.fp32, torch.float16: MathMode.fp16, torch.bfloat16: MathMode.bf16}
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def draw(shape: tuple[int, ...], dtype: torch.dtype, distribution: str, gen: torch.Generator,
         device: torch.device) -> torch.Tensor:
    """A fresh tensor from one of ``DISTRIBUTIONS`` (never zeros)."""
    # in place after the draw: a 6.4 GB input takes its own memory, not a temporary beside it
    if distribution == "uniform01":
        x = torch.rand(shape, generator=gen, device=device)
    elif distribution == "normal":
        x = torch.randn(shape, generator=gen, device=device)
    elif distribution == "uniform_signed":
        x = torch.rand(shape, generator=gen, device=device).mul_(2).sub_(1)
    elif distribution == "normal_scaled":
        x = torch.randn(shape, generator=gen, device=device).mul_(4)
    elif distribution == "normal_offset":
        x = torch.randn(shape, generator=gen, device=device).add_(3)
    elif distribution in ("wide_scale", "large_offset"):
        low, high = WIDE_RANGES.get(dtype, WIDE_RANGES[torch.float32])["scale" if distribution == "wide_scale"
                                                                      else "offset"]
        decade = high - 0.5 * float(torch.rand((), generator=gen, device=device))  # the top half-decade
        x = torch.randn(shape, generator=gen, device=device)
        x = x.mul_(10.0 ** decade) if distribution == "wide_scale" else x.add_(10.0 ** decade)
    else:
        raise ValueError(f"unknown distribution {distribution!r}")
    return x.to(dtype)


STATE_CHUNK_ELEMENTS = 1 << 24
"""``randomize_state`` works on a parameter in slices of this many elements: its fp64 statistics and
noise take a slice's memory (128 MB), not several copies of a 4 GB weight (the memory budget)."""


def randomize_state(module: torch.nn.Module, gen: torch.Generator) -> None:
    """Replace every floating parameter and buffer with random values of a similar scale.

    Default initializations (LayerNorm's ones and zeros, BatchNorm's unit variance) hide bugs
    such as a dropped affine term. Variances stay positive. Mean and standard deviation are
    computed in fp64 over slices, and the new values written slice by slice, in place.
    """
    with torch.no_grad():
        for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            flat = tensor.detach().view(-1) if tensor.is_contiguous() else None
            if flat is None:  # rare: whole-tensor work on a copy, written back at once
                flat = tensor.detach().reshape(-1).clone()
            slices = [flat[i:i + STATE_CHUNK_ELEMENTS] for i in range(0, flat.numel(), STATE_CHUNK_ELEMENTS)]
            count = flat.numel()
            mean = sum(float(piece.double().sum()) for piece in slices) / count
            squares = sum(float((piece.double() - mean).pow(2).sum()) for piece in slices)
            std = (squares / (count - 1)) ** 0.5 if count > 1 else 0.0
            std = std if std > 0 else 0.5
            variance = "var" in name.rsplit(".", 1)[-1]
            for piece in slices:
                value = mean + std * torch.randn(piece.shape, generator=gen, device=piece.device, dtype=torch.float64)
                if variance:
                    value = value.abs() + 0.5
                piece.copy_(value.to(piece.dtype))
            if not tensor.is_contiguous():
                tensor.copy_(flat.view(tensor.shape))


@dataclass
class BuiltProblem:
    """A problem ready to run on one device."""

    spec: Problem
    dtype: torch.dtype
    device: torch.device
    reference: Callable[..., torch.Tensor]
    """The library reference: a module or function, on the device, in the problem's dtype."""
    init_inputs: list
    """Constructor arguments for a ``ModelNew`` candidate (empty for catalogue ops)."""
    input_factory: Callable[[str, torch.Generator], list]
    """Fresh inputs for one distribution."""
    catalogue_cost: Callable[[], tuple[float, float, bool]] | None
    """(F, B, matmul_like) from the catalogue, or None: estimate it generically."""
    catalogue_name: str | None = None
    tolerance: Tolerance | None = None
    """The problem's own numerics tolerance (a catalogue op's); None: ``TOLERANCES[dtype]``."""
    catalogue_math_mode: MathMode | None = None
    """The catalogue op's math mode in this dtype (TF32 for ``matmul_tf32``); None: the dtype's."""

    @property
    def numerics_tolerance(self) -> Tolerance:
        """The tolerance numerics holds a candidate to: the problem's own, else the dtype's default."""
        return self.tolerance if self.tolerance is not None else TOLERANCES[self.dtype]

    def make_inputs(self, distribution: str, gen: torch.Generator) -> list:
        return self.input_factory(distribution, gen)

    def reference_fp64(self) -> Callable[..., torch.Tensor]:
        """The same reference computed in float64: the module called with fp64 copies of its floating
        parameters and buffers in their place (``torch.func.functional_call``; the original keeps
        its dtype and values), made at each call and freed after it, so the judge never holds the
        module's fp32 copy beside its fp64 one (the memory budget of a 4 GB weight)."""
        module = self.reference
        if not isinstance(module, torch.nn.Module):
            return module

        def call(*args):
            state = {name: t.double() if t.is_floating_point() else t
                     for name, t in [*module.named_parameters(), *module.named_buffers()]}
            return torch.func.functional_call(module, state, args)

        return call

    def cost(self, inputs: list, output: torch.Tensor | None = None) -> Cost:
        """The problem's FLOPs and compulsory bytes. The generic count runs the reference once under
        a FLOP counter; its own result stands in for ``output`` where none is given."""
        math_mode = self.catalogue_math_mode or _MODES[self.dtype]
        if self.catalogue_cost is not None:
            flops, nbytes, matmul_like = self.catalogue_cost()
            estimate = f"catalogue:{self.catalogue_name}"
        else:
            flops, nbytes, matmul_like = _generic_cost(self.reference, inputs, output)
            estimate = "generic: FlopCounterMode FLOPs (matmul/conv/attention only), bytes of inputs, parameters and output"
        peak_mode = MathMode.tf32 if (math_mode is MathMode.fp32 and matmul_like) else math_mode
        return Cost(flops=flops, bytes_compulsory=nbytes, math_mode=math_mode, peak_mode=peak_mode, estimate=estimate)

    def build_candidate(self, entry: Any) -> tuple[Callable[..., torch.Tensor], bool | None, str | None]:
        """Instantiate the candidate's entry point; copy the reference state into it.

        Returns the callable, whether the state was copied (None: nothing to copy), and a note.
        """
        state = self.reference.state_dict() if isinstance(self.reference, torch.nn.Module) else {}
        return instantiate(entry, self.init_inputs, self.device, self.dtype, state)


def instantiate(entry: Any, init_inputs: list, device: torch.device, dtype: torch.dtype,
                state: dict) -> tuple[Callable[..., torch.Tensor], bool | None, str | None]:
    """A ``ModelNew`` class built with the problem's init inputs, on ``device`` in ``dtype``, with
    ``state`` (the reference's) copied in by ``load_state_dict``; a function is used as it is.

    Returns the callable, whether the state was copied (None: nothing to copy), and a note. Shared
    by the candidate's process and the ncu pass; construction errors propagate to the caller.
    """
    if isinstance(entry, type) and issubclass(entry, torch.nn.Module):
        module = entry(*init_inputs).to(device)
        if dtype != torch.float32:
            module = module.to(dtype)
        if not state:
            return module, None, None
        try:  # load_state_dict copies: the module never shares the storage it was given
            module.load_state_dict(state, strict=True)
            return module, True, None
        except Exception as exc:
            note = ("the candidate's parameters do not match the reference's state_dict keys or shapes "
                    f"({str(exc).splitlines()[0][:200]}); reference parameters left as initialized, "
                    "candidate seeded alike")
            return module, False, note
    if callable(entry):
        return entry, None, None
    raise TypeError(f"entry point is a {type(entry).__name__}, not a class or function")


def _generic_cost(reference, inputs: list, output: torch.Tensor | None) -> tuple[float, float, bool]:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        result = reference(*inputs)
    if output is None:
        output = result if isinstance(result, torch.Tensor) else torch.empty(0)
    del result
    flops = float(counter.get_total_flops())
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if isinstance(reference, torch.nn.Module):
        tensors += list(reference.parameters()) + list(reference.buffers())
    nbytes = float(sum(t.numel() * t.element_size() for t in tensors) + output.numel() * output.element_size())
    return flops, nbytes, flops > 0


def build_problem(spec: Problem, device: torch.device, seed: int) -> BuiltProblem:
    """Build the reference on ``device``; ``seed`` drives module construction only."""
    if spec.kind == "reference_op":
        return _build_catalogue(spec, device)
    return _build_kernelbench(spec, device, seed)


def _build_catalogue(spec: Problem, device: torch.device) -> BuiltProblem:
    from kernelgate.reference_ops import get_op

    try:
        op = get_op(spec.name)
        shape = op.shape(spec.shape)
    except KeyError as exc:
        raise ProblemError(str(exc.args[0])) from exc
    dtype_name = spec.dtype or op.default_dtype
    dtype = _DTYPES[dtype_name]

    def factory(distribution: str, gen: torch.Generator) -> list:
        return op.make_inputs(shape, dtype, distribution, gen, device)  # draw(), then the op's domain

    element = torch.empty((), dtype=dtype).element_size()
    return BuiltProblem(
        spec=spec, dtype=dtype, device=device, reference=op.reference, init_inputs=[],
        input_factory=factory,
        catalogue_cost=lambda: (op.flops(shape), op.bytes_compulsory(shape, element), op.matmul_like),
        catalogue_name=op.name, tolerance=op.tolerance_for(dtype_name),
        catalogue_math_mode=op.math_mode(dtype_name),
    )


CPU_COPIES = 8
"""Without a GPU, a KernelBench file is screened only when this many copies of one call's data
(inputs, output, parameters: the judge's trials, fp64 references, the candidate's own) fit the
worker's host memory; otherwise the error names ``--shape`` and a shape that fits."""


def _build_kernelbench(spec: Problem, device: torch.device, seed: int) -> BuiltProblem:
    from kernelgate.adapters.kernelbench import check_footprint, load_problem_module

    if device.type == "cpu":  # sized on the meta device first: a 6.4 GB input must not be drawn to fail
        from kernelgate.worker.supervisor import default_host_memory_mb

        check_footprint(spec.name, spec.shape, default_host_memory_mb() << 20, factor=CPU_COPIES)
    module = load_problem_module(spec.name, spec.shape)
    try:
        torch.manual_seed(seed)
        init_inputs = list(module.get_init_inputs())
        reference = module.Model(*init_inputs).to(device)
        templates = _shapes_only(module)  # for their dtypes: no memory where all are floating
        if templates is None:
            with device:  # tensors the file makes land on the device: CPU random draws of large inputs take seconds
                templates = list(module.get_inputs())
    except Exception as exc:
        raise ProblemError(f"problem {spec.name} failed to build: {type(exc).__name__}: {exc}") from exc
    float_templates = [t for t in templates if isinstance(t, torch.Tensor) and t.is_floating_point()]
    own_dtype = float_templates[0].dtype if float_templates else torch.float32
    dtype = _DTYPES[spec.dtype] if spec.dtype else own_dtype
    if dtype != torch.float32 or reference_has_other_dtype(reference, dtype):
        reference = reference.to(dtype)

    def factory(distribution: str, gen: torch.Generator) -> list:
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device)))
        fresh = _shapes_only(module)  # all floating: shapes are enough, drawn below without the file's own draw
        if fresh is None:
            with device:
                fresh = list(module.get_inputs())  # integer inputs and shapes come from the file itself
        out = []
        for tensor in fresh:
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                out.append(draw(tuple(tensor.shape), dtype, distribution, gen, device))
            elif isinstance(tensor, torch.Tensor):
                out.append(tensor.to(device))
            else:
                out.append(tensor)
        return out

    return BuiltProblem(spec=spec, dtype=dtype, device=device, reference=reference, init_inputs=init_inputs,
                        input_factory=factory, catalogue_cost=None)


def _shapes_only(module) -> list | None:
    """The file's inputs made on the meta device (no memory) when every tensor among them is
    floating point, else None (integer inputs carry values the file chose: made for real)."""
    try:
        with torch.device("meta"):
            made = list(module.get_inputs())
    except Exception:  # an op without a meta kernel, a device check: make them for real
        return None
    if any(isinstance(t, torch.Tensor) and not t.is_floating_point() for t in made):
        return None
    return made


def reference_has_other_dtype(module: torch.nn.Module, dtype: torch.dtype) -> bool:
    return any(p.is_floating_point() and p.dtype != dtype for p in module.parameters())
