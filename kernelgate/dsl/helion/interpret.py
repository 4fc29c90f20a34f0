"""libdevice in Triton's interpreter, for Helion's generated code on a machine without a GPU.

Helion lowers most math (``torch.exp``, ``torch.tanh``, ``torch.rsqrt``...) to
``libdevice.<fn>`` calls. In ``triton.language.extra.libdevice`` those are empty stubs that the
compiler replaces with the CUDA (or HIP) device library; Triton's interpreter does not, so a
stub returns None and the kernel fails on its next use of the value. ``install`` replaces the
stubs whose meaning numpy has with elementwise numpy functions over the interpreter's arrays,
in this process only and only when the interpreter runs (never when kernels are compiled).
The others raise ``NotImplementedError`` naming the function, so a CPU screen says what it
could not run instead of failing on ``None``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["install", "INSTALLED_NOTE"]

INSTALLED_NOTE = ("without a GPU the generated Triton ran in Triton's interpreter, libdevice math as numpy "
                  "functions (float32 rounding may differ from the CUDA device library in the last bits)")


def _erf(x):
    from triton.runtime import interpreter

    return interpreter.np_erf_fp32(x) if x.dtype == np.float32 else interpreter.np_erf_fp64(x)


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


_FLOAT: dict[str, Callable[..., Any]] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "round": _round_half_away,
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1,
    "fast_expf": np.exp, "fast_exp10f": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "fast_logf": np.log, "fast_log2f": np.log2, "fast_log10f": np.log10,
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "fast_sinf": np.sin, "fast_cosf": np.cos, "fast_tanf": np.tan,
    "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x),
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "fast_tanhf": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "erfc": lambda x: 1 - _erf(x),
    "pow": np.power, "fast_powf": np.power, "fmod": np.fmod, "remainder": np.remainder, "hypot": np.hypot,
    "copysign": np.copysign, "nextafter": np.nextafter, "fdim": lambda x, y: np.maximum(x - y, 0),
    "fma": lambda x, y, z: x * y + z, "fma_rn": lambda x, y, z: x * y + z,
    "fast_dividef": np.divide, "div_rn": np.divide, "rcp_rn": lambda x: 1 / x,
    "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply,
    "saturatef": lambda x: np.clip(x, 0, 1),
}
"""libdevice functions whose result has the type of their widest floating argument."""

_PREDICATE: dict[str, Callable[..., Any]] = {
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite, "isfinited": np.isfinite,
}
"""libdevice functions that answer an int32 0/1 per element."""

_installed = False


def _elementwise(name: str, fn: Callable[..., Any], result: str | None) -> Callable[..., Any]:
    def call(*args):
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle, _get_np_dtype

        tensors = [a for a in args if isinstance(a, tl.tensor)]
        if not tensors:
            raise TypeError(f"libdevice.{name} called without a tensor argument")
        ref = max(tensors, key=lambda t: t.handle.data.ndim)
        scalar = getattr(tl, result) if result else ref.dtype
        data = [a.handle.data if isinstance(a, tl.tensor) else a for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*data))
        out = out.astype(_get_np_dtype(scalar), copy=False)
        if out.shape == ref.handle.data.shape:
            ty = ref.type.with_element_ty(scalar) if ref.type.is_block() else scalar
        else:
            ty = tl.block_type(scalar, list(out.shape))
        return tl.tensor(TensorHandle(out, scalar), ty)

    call.__name__ = name
    return call


def _missing(name: str) -> Callable[..., Any]:
    def call(*args):
        raise NotImplementedError(f"libdevice.{name} has no implementation in Triton's interpreter (the CPU path of "
                                  "the gate); on a GPU it compiles normally")

    call.__name__ = name
    return call


def install() -> None:
    """Give the libdevice stubs numpy meanings (idempotent). Call only when the interpreter runs."""
    global _installed
    if _installed:
        return
    import triton.language.extra.libdevice as libdevice

    for name, value in list(vars(libdevice).items()):
        if name.startswith("_") or not callable(value) or getattr(value, "__module__", None) != libdevice.__name__:
            continue
        if name in _FLOAT:
            setattr(libdevice, name, _elementwise(name, _FLOAT[name], None))
        elif name in _PREDICATE:
            setattr(libdevice, name, _elementwise(name, _PREDICATE[name], "int32"))
        else:
            setattr(libdevice, name, _missing(name))
    _installed = True
