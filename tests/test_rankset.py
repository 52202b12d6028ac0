"""Rank sets for people (issue 16): never read as a number, "all but a few" as a complement."""

from hangdbg.rankset import compress, expand, rank_class, rank_set, ranks_text


def test_rank_set_has_braces_and_spaces():
    assert rank_set([900, 3, 517, 3]) == "{3, 517, 900}"
    assert rank_set([0, 1, 2, 5]) == "{0-2, 5}"
    assert rank_set([]) == "{}"
    assert rank_set(range(0, 100, 2), limit=3) == "{0, 2, 4, ... 47 more}"


def test_rank_class_picks_the_shorter_of_set_and_complement():
    most = [r for r in range(4096) if r not in (17, 900, 3001)]
    assert rank_class(most, 4096) == "4093 ranks {0-4095 except 17, 900, 3001}"
    assert rank_class(most) == "4093 ranks {0-4095 except 17, 900, 3001}"
    assert rank_class([3, 517, 900], 4096) == "3 ranks {3, 517, 900}"
    assert rank_class([7]) == "rank {7}"
    assert rank_class(range(8)) == "8 ranks {0-7}"
    assert rank_class([0, 1, 2, 5, 6, 7]) == "6 ranks {0-2, 5-7}"
    # a class that is most of the job but misses rank 0 names it
    assert rank_class(range(1, 4096), 4096) == "4095 ranks {1-4095}"
    assert rank_class([r for r in range(4096) if r != 0 and r != 5], 4096) == "4094 ranks {1-4, 6-4095}"


def test_machine_form_round_trips():
    ranks = [0, 1, 2, 5, 8, 9]
    assert compress(ranks) == "0-2,5,8-9"
    assert expand(compress(ranks)) == ranks
    assert ranks_text([4]) == "rank 4"


def test_rank_class_of_a_huge_sparse_set_lists_gaps_not_ranks():
    # (found by the fuzzer: a garbled rank 4000000 made the complement a list of 4 million ints)
    assert rank_class([0, 4_000_000], 4_000_001) == "2 ranks {0, 4000000}"
    import tracemalloc

    tracemalloc.start()
    try:
        assert rank_class([0, 1, 2, 4, 5, 4_000_000]) == "6 ranks {0-2, 4-5, 4000000}"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # gaps as parts, not 4 million ints
    most = [r for r in range(1_000_000) if r not in (17, 900, 3001)]
    assert rank_class(most, 1_000_000) == "999997 ranks {0-999999 except 17, 900, 3001}"
