"""Reference problem: KernelBench Level-1 #40 LayerNorm shape.

Normalizes over the last three dims (features, dim1, dim2), so the kernel sees
BATCH_SIZE = 16 rows of 64*256*256 = 4M elements each.
"""
import torch
import torch.nn as nn

BATCH_SIZE = 16
FEATURES = 64
DIM1 = 256
DIM2 = 256


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.rand(BATCH_SIZE, FEATURES, DIM1, DIM2)]


def get_init_inputs():
    return [(FEATURES, DIM1, DIM2)]
