"""Does one data-parallel update match the full-batch update only with the right scaling?"""

import pytest

from parallel_budget import data_parallel_update


def test_lesson_two_rank_update():
    """w=1, gradients 2 and 6, lr 0.1: both ranks 0.6?"""
    u = data_parallel_update(1.0, [2, 6], 0.1)
    assert u.aggregated_grad == 4
    assert u.weights == pytest.approx((0.6, 0.6))
    assert u.matches_reference


@pytest.mark.parametrize("reduction, w", [("sum", 0.2), ("mean_twice", 0.8)])
def test_scaling_bugs_are_visible(reduction, w):
    """Sum without scaling and averaging twice give other weights than the reference?"""
    u = data_parallel_update(1.0, [2, 6], 0.1, reduction)
    assert u.weights[0] == pytest.approx(w)
    assert not u.matches_reference


def test_bad_arguments():
    with pytest.raises(ValueError, match="reduction"):
        data_parallel_update(1, [2, 6], 0.1, "avg")
    with pytest.raises(ValueError, match="grads"):
        data_parallel_update(1, [], 0.1)
    with pytest.raises(ValueError, match="lr"):
        data_parallel_update(1, [2, 6], "0.1")
