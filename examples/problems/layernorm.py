"""Reference problem: LayerNorm over the last dim of a (BATCH, HIDDEN) fp32 tensor."""
import torch
import torch.nn as nn

BATCH = 4096
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.rand(BATCH, HIDDEN)]


def get_init_inputs():
    return [(HIDDEN,)]
