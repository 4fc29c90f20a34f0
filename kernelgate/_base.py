"""The one pydantic base model every kernelgate model derives from."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Model"]


class Model(BaseModel):
    """Strict, documented models: field docstrings reach the JSON schema, unknown keys are errors."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        extra="forbid",
        frozen=False,
        ser_json_inf_nan="strings",
    )
