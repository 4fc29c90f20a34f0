"""Reference problem: sum over the last dim of a (ROWS, COLS) bf16 tensor -> (ROWS,) bf16."""
import torch
import torch.nn as nn

ROWS = 4096
COLS = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.rand(ROWS, COLS).bfloat16()]


def get_init_inputs():
    return []
