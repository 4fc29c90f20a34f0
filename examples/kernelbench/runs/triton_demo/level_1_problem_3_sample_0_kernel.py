"""Sample 0 for problem 3: imports Triton but calls torch.relu (no kernel of its DSL runs)."""
import torch
import triton  # noqa: F401


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
