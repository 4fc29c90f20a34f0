"""kernelgate._base.Model, the base of every kernelgate model: unknown keys are errors, attribute
docstrings reach the JSON schema, infinities and NaN survive a JSON round trip (as strings), fields
can be assigned; and every pydantic model kernelgate defines derives from it."""

from __future__ import annotations

import importlib
import inspect
import json
import math
import pkgutil

import pydantic
import pytest

import kernelgate
from kernelgate._base import Model


class Sample(Model):
    ratio: float
    """Library time over candidate time."""
    name: str = "x"


def test_unknown_keys_are_errors():
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        Sample(ratio=1.0, rattio=2.0)
    with pytest.raises(pydantic.ValidationError):
        Sample.model_validate_json('{"ratio": 1.0, "extra": 1}')
    assert Sample.model_json_schema()["additionalProperties"] is False


def test_attribute_docstrings_reach_the_schema():
    props = Sample.model_json_schema()["properties"]
    assert props["ratio"]["description"] == "Library time over candidate time."
    assert "description" not in props["name"]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_floats_round_trip_through_json(value):
    text = Sample(ratio=value).model_dump_json()
    assert json.loads(text)["ratio"] in ("Infinity", "-Infinity", "NaN")  # strict JSON, no bare NaN token
    back = Sample.model_validate_json(text).ratio
    assert back == value or (math.isnan(value) and math.isnan(back))


def test_models_are_mutable():
    s = Sample(ratio=1.0)
    s.name = "y"
    assert s.name == "y" and s.model_dump() == {"ratio": 1.0, "name": "y"}


def test_every_kernelgate_model_derives_from_it():
    """Every pydantic model in kernelgate's modules (those importable on this machine) is a Model."""
    found, strays = [], []
    modules = [kernelgate]
    for info in pkgutil.walk_packages(kernelgate.__path__, "kernelgate."):
        try:
            modules.append(importlib.import_module(info.name))
        except ImportError:  # an optional extra not installed here
            pass
    for module in modules:
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, pydantic.BaseModel) and obj.__module__.startswith("kernelgate"):
                found.append(obj)
                if not issubclass(obj, Model):
                    strays.append(f"{obj.__module__}.{obj.__qualname__}")
    assert len(found) > 10 and not strays, strays
