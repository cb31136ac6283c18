"""The alpha-beta cost model ranks repairs the way communication actually costs."""
from verifier.synthesis.cost import COLLECTIVES, CostModel

MODEL = CostModel()
BYTES = 4 * 2048 * 4096


def test_ring_factors_follow_the_collective_kind():
    n = 8
    assert COLLECTIVES["all_reduce"].ring_factor(n) == 2 * (n - 1) / n
    assert COLLECTIVES["reduce_scatter"].ring_factor(n) == (n - 1) / n
    assert COLLECTIVES["all_to_all"].ring_factor(n) == (n - 1) / n
    assert COLLECTIVES["broadcast"].ring_factor(n) == 1.0
    # an all-gather sends its whole block to n-1 peers: (n-1)/n of the gathered tensor
    assert COLLECTIVES["all_gather"].ring_factor(n) * (BYTES / n) == (n - 1) / n * BYTES


def test_all_reduce_is_cheaper_than_reduce_scatter_plus_all_gather():
    for n in (2, 4, 8):
        shard = BYTES / n
        split = MODEL.collective("reduce_scatter", n, BYTES) + MODEL.collective("all_gather", n, shard)
        assert MODEL.collective("all_reduce", n, BYTES) < split


def test_all_reduce_is_cheaper_than_gathering_partial_sums():
    for n in (2, 4, 8):
        gather = MODEL.collective("all_gather", n, BYTES) + MODEL.gamma_us_per_byte * n * BYTES
        assert MODEL.collective("all_reduce", n, BYTES) < gather


def test_a_group_of_one_rank_costs_nothing():
    assert MODEL.collective("all_reduce", 1, BYTES) == 0.0
