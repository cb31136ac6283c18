"""A paged KV gather: each sequence's pages are rows of a shared pool that a block table numbers,
``Out[b, p * page_size + s, :] = KV[BlockTable[b, p], s, :]``, the table drawn by the file as
``torch.randperm(num_pages)`` viewed as ``(batch, pages_per_seq)`` (every page used once).

An index tensor is not a symbolic input (the page it selects must be known): the table is
redrawn by the same call at the reduced sizes (a permutation of the pool's reduced rows, one
entry per row as in the file), the same for the reference, and the report says so.

Expected: verified (Out = ref_program(KV, BlockTable) for the sampled table).
"""
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def paged_gather(batch, pages_per_seq, page_size, dim):
    num_pages = batch * pages_per_seq

    @T.prim_func
    def main(KV: T.Tensor((num_pages, page_size, dim), T.float32),
             BlockTable: T.Tensor((batch, pages_per_seq), T.int32),
             Out: T.Tensor((batch, pages_per_seq * page_size, dim), T.float32)):
        with T.Kernel(batch, pages_per_seq, threads=128) as (b, p):
            for s, d in T.Parallel(page_size, dim):
                Out[b, p * page_size + s, d] = KV[BlockTable[b, p], s, d]

    return main


def ref_program(kv, block_table):
    return kv[block_table.long()].flatten(1, 2)


batch, pages_per_seq, page_size, dim = 4, 8, 16, 64
kernel = paged_gather(batch, pages_per_seq, page_size, dim)
kv = torch.randn(batch * pages_per_seq, page_size, dim, device="cuda")
block_table = torch.randperm(batch * pages_per_seq, device="cuda").to(torch.int32).view(batch, pages_per_seq)
torch.testing.assert_close(kernel(kv, block_table), ref_program(kv, block_table))
