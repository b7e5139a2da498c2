"""Does a failed job resume from the newest step every rank saved completely, and count the steps it redoes?"""

from __future__ import annotations

import pytest

import parallel_budget as pb


def test_newest_step_all_ranks_have():
    """Is the resume step the newest common one, not one rank's newest file?"""
    p = pb.resume_point({0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2]}, reached=3)
    assert (p.step, p.lost_steps) == (2, 1)


def test_saves_every_k_steps_and_steps_after_the_failure():
    """Saving every 2 steps and failing at the start of step 4 (3 finished): resume from 2, redo 1."""
    assert pb.resume_point(range(2, 7, 2), reached=3) == pb.ResumePoint(2, 3, 1)
    assert pb.resume_point([], reached=3) == pb.ResumePoint(None, 3, 3)
    assert pb.resume_point({0: [5], 1: [1]}, reached=6).step is None


@pytest.mark.parametrize("saved, reached, arg", [({0: "12"}, 3, "saved"), ([1, 2.5], 3, "saved"), ([1], -1, "reached")])
def test_bad_input_is_named(saved, reached, arg):
    """Is a bad argument refused in Chinese, naming it?"""
    with pytest.raises(ValueError, match=arg) as info:
        pb.resume_point(saved, reached=reached)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(info.value))
