"""Does check_collectives find the first place where the ranks' collective sequences disagree, and say what happens there?"""

import pytest

from parallel_budget import check_collectives

AR = "all_reduce"


def test_consistent_sequences_do_not_hang():
    """Do identical sequences report no hang and the number of completed collectives?"""
    c = check_collectives([[AR, AR, "barrier"]] * 4)
    assert c.consistent and not c.hangs and c.completed == 3 and c.mismatch_at is None and c.outcome is None
    assert "协议一致" in c.explain()


def test_exited_rank_and_other_branch():
    """Is a rank that stopped 'missing', one with another call 'diverged', and does everyone who entered block?"""
    c = check_collectives([[AR, AR, AR], [AR, AR, AR], [AR, AR], [AR, AR, "barrier"]])
    assert c.hangs and c.outcome == "block" and c.completed == 2 and c.mismatch_at == 2
    assert c.waiting == (0, 1) and c.missing == (2,) and c.diverged == (3,) and c.blocked == (0, 1, 3)
    text = c.explain()
    assert "第 3 次" in text and "rank 2" in text and "rank 3 调用的是 barrier" in text and "rank 0、1、3" in text


def test_extra_collective_on_one_rank():
    """Does an extra all-reduce only on rank 0 (evaluation branch) make rank 0 wait at that position?"""
    c = check_collectives([[AR, AR], [AR]])
    assert c.mismatch_at == 1 and c.waiting == (0,) and c.missing == (1,) and c.outcome == "block"


def test_a_block_ends_at_the_timeout_not_never():
    """Does the diagnosis of a missing rank say the wait ends at the timeout (watchdog on NCCL), not 'forever'?"""
    text = check_collectives([[AR, AR], [AR]]).explain()
    assert "超时" in text and "watchdog" in text
    assert "一直等待" not in text and "永远" not in text


def test_same_shaped_swap_pairs_silently():
    """Do two swapped all-reduces of the same shape pair up without an error or a hang, and is that said?"""
    c = check_collectives([[("all_reduce(grad)", (4,)), ("all_reduce(loss)", (4,))],
                           [("all_reduce(loss)", (4,)), ("all_reduce(grad)", (4,))]])
    assert c.outcome == "silent" and not c.hangs
    text = c.explain()
    assert "悄悄配错" in text and "不报错" in text and "超时" not in text


def test_a_shape_or_operation_mismatch_errors_under_detail():
    """Is a swap of different shapes, or another operation, a mismatch that DETAIL turns into an error?"""
    sizes = check_collectives([[("all_reduce(grad)", (4,)), ("all_reduce(loss)", (1,))],
                               [("all_reduce(loss)", (1,)), ("all_reduce(grad)", (4,))]])
    ops = check_collectives([[AR, AR], [AR, "barrier"]])
    same_name = check_collectives([[(AR, 4)], [(AR, 1)]])
    for c in (sizes, ops, same_name):
        assert c.outcome == "mismatch" and not c.hangs
        assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in c.explain() and "报错" in c.explain()
    assert "形状不同" in same_name.explain()


def test_a_silent_pairing_is_followed_to_what_comes_next():
    """After a skipped step pairs silently, does the check go on to the barrier that meets an all-reduce?"""
    g = [("all_reduce(grad, step=0)", 4), ("all_reduce(grad, step=1)", 4), ("all_reduce(grad, step=2)", 4), ("barrier", ())]
    c = check_collectives([g, g, [g[0], g[2], g[3]]])
    assert c.outcome == "silent" and c.mismatch_at == 1
    assert c.then is not None and c.then.outcome == "mismatch" and c.then.mismatch_at == 2
    assert "此后序列仍然错位，第 3 次" in c.explain()


def test_names_without_shapes_say_both_possibilities():
    """With names only, is a same-operation swap left open between a silent pairing and a mismatch?"""
    c = check_collectives([["all_reduce(grad)", "all_reduce(loss)"], ["all_reduce(loss)", "all_reduce(grad)"]])
    assert c.outcome == "unknown" and "悄悄配错" in c.explain() and "报错" in c.explain()


def test_the_hang_labs_prediction_tells_the_cases_apart():
    """Does the hang lab's 预测 column say 'silent', 'mismatch' or 'block' per variant (no torch needed)?"""
    from parallel_budget.labs import hang

    def record(variant, calls):
        return {"variant": variant, "phase": "broken", "detected": True, "completed": False, "message": "m",
                "failed_at": len(calls) - 1, "calls": calls, "seconds": 0.1}

    good = {"skip": ["all_reduce(grad, step=0)", "all_reduce(grad, step=1)"],
            "order": ["all_reduce(grad)"], "exit": ["all_reduce(grad, step=0)", "all_reduce(grad, step=1)"]}
    bad = {"skip": ["all_reduce(grad, step=0)", "all_reduce(grad, step=2)"],
           "order": ["all_reduce(loss)"], "exit": ["all_reduce(grad, step=0)"]}
    results = [{"records": [record(v, calls[v]) for v in good], "diagnosis": None} for calls in (good, bad)]
    report = hang.summarize(results, {"detect_timeout": 1.0}, 2)
    predicted = {row.item: row.predicted for row in report.rows}
    assert "悄悄配错" in predicted[f"{hang.LABEL['skip']}（rank 1 出错）"]
    assert "形状不同" in predicted[f"{hang.LABEL['order']}（rank 1 出错）"]
    assert "超时" in predicted[f"{hang.LABEL['exit']}（rank 1 出错）"]
    assert all("一直等待" not in p for p in predicted.values())


@pytest.mark.parametrize("calls", [None, "all_reduce", [[AR]], [[AR], "all_reduce"], [[AR], [("all_reduce", "4")]]])
def test_bad_input_is_named_in_chinese(calls):
    """Is malformed input refused with a message naming calls?"""
    with pytest.raises(ValueError, match="check_collectives\\(\\) 的参数 calls"):
        check_collectives(calls)
