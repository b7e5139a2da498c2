"""Does check_collectives find the first place where the ranks' collective sequences disagree?"""

import pytest

from parallel_budget import check_collectives

AR = "all_reduce"


def test_consistent_sequences_do_not_hang():
    """Do identical sequences report no hang and the number of completed collectives?"""
    c = check_collectives([[AR, AR, "barrier"]] * 4)
    assert not c.hangs and c.completed == 3 and c.mismatch_at is None
    assert "协议一致" in c.explain()


def test_exited_rank_and_other_branch():
    """Is a rank that stopped 'missing', one with another call 'diverged', the rest 'waiting'?"""
    c = check_collectives([[AR, AR, AR], [AR, AR, AR], [AR, AR], [AR, AR, "barrier"]])
    assert c.hangs and c.completed == 2 and c.mismatch_at == 2
    assert c.waiting == (0, 1) and c.missing == (2,) and c.diverged == (3,)
    text = c.explain()
    assert "第 3 次" in text and "rank 2" in text and "rank 3" in text and "rank 0, 1" in text


def test_extra_collective_on_one_rank():
    """Does an extra all-reduce only on rank 0 (evaluation branch) make rank 0 wait at that position?"""
    c = check_collectives([[AR, AR], [AR]])
    assert c.mismatch_at == 1 and c.waiting == (0,) and c.missing == (1,)


@pytest.mark.parametrize("calls", [None, "all_reduce", [[AR]], [[AR], "all_reduce"]])
def test_bad_input_is_named_in_chinese(calls):
    """Is malformed input refused with a message naming calls?"""
    with pytest.raises(ValueError, match="check_collectives\\(\\) 的参数 calls"):
        check_collectives(calls)
