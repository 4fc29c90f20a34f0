"""A KernelBench-style problem with a parameter: multiply each column by a learned scale.

The candidate must get the reference's (randomized) ``scale`` through ``load_state_dict``:
a ``ModelNew`` that initializes ``scale`` to ones is only correct if the state is copied.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


batch_size = 8
dim = 256


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [dim]
