"""Column-parallel linear layer whose gathered column blocks are re-assembled on the wrong dim.

Twin of dist_colparallel_allgather_ok.py.  all_gather_into_tensor concatenates along
dim 0; the result is reshaped to (TOKENS, OUT) as if the blocks had been concatenated
along the columns.

Bug: concatenation on dim 0 where dim 1 is needed; the shape is right, the values are
scrambled (rows of one block land in the columns of another).

Expected: violations
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 8, 16, 32


def example_inputs():
    # forward only: a plain all_gather_into_tensor carries no gradient, and gloo's copies into views
    # of the output raise for a trainable input ("a view was created in no_grad mode")
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w.chunk(world, dim=1)[rank]
    gathered = torch.empty(world * TOKENS, OUT // world)
    dist.all_gather_into_tensor(gathered, y)
    return gathered.reshape(TOKENS, OUT)
