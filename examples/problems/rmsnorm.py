"""Reference problem: RMSNorm over the last dim of a (BATCH, HIDDEN) fp32 tensor, learnable weight."""
import torch
import torch.nn as nn

BATCH = 4096
HIDDEN = 4096
EPS = 1e-6


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = EPS

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.rand(BATCH, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
