"""Softmax candidate in Helion (deliberately slow): three passes over each row in 16-wide tiles.

For ``examples/problems/softmax.py``: torch.softmax(x, dim=-1) over a (ROWS, COLS) =
(4096, 8192) fp32 tensor.

Design: one program per row (``hl.tile(n)`` with a block of one row), and three inner loops
over the row in tiles of 16 columns: the running max, then the sum of exp(x - max), then the
output. Correct for any COLS, since Helion masks the last tile.

Defect: the tile sizes and the passes. A 16-column tile on one warp leaves half of the 32
lanes idle and moves 64 bytes per load, the three loops are serial chains of 512 iterations
each at COLS = 8192, and the row is read three times (plus one write) instead of once. The fix
(``softmax_good.py``): take the row whole (``x[tile_n, :]``), or at least tile it in blocks of
1024+ columns, with ``num_warps`` matched to the block, so one read and one write suffice.
"""
import torch
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1, 16, 16, 16], num_warps=1, num_stages=1), static_shapes=True)
def softmax_three_pass(x: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        row_max = hl.full([tile_n], float("-inf"), dtype=torch.float32)
        for tile_m in hl.tile(m):
            row_max = torch.maximum(row_max, torch.amax(x[tile_n, tile_m].to(torch.float32), dim=1))
        row_sum = hl.zeros([tile_n], dtype=torch.float32)
        for tile_m in hl.tile(m):
            row_sum = row_sum + torch.sum(torch.exp(x[tile_n, tile_m].to(torch.float32) - row_max[:, None]), dim=1)
        for tile_m in hl.tile(m):
            y = torch.exp(x[tile_n, tile_m].to(torch.float32) - row_max[:, None]) / row_sum[:, None]
            out[tile_n, tile_m] = y.to(out.dtype)
    return out


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.shape[-1]
        return softmax_three_pass(x.contiguous().view(-1, n)).view(x.shape)
