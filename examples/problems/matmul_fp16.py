"""Reference problem: fp16 matmul C = A @ B, A (M, K), B (K, N), fp16 inputs and output."""
import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K).half(), torch.rand(K, N).half()]


def get_init_inputs():
    return []
