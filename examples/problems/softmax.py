"""Reference problem: softmax over the last dim of a (ROWS, COLS) fp32 tensor."""
import torch
import torch.nn as nn

ROWS = 4096
COLS = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.rand(ROWS, COLS)]


def get_init_inputs():
    return []
