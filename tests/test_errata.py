"""Do the errata of the second expert review (issue 24) stay fixed?

Item 1 (what a hang does) is held by ``test_protocol.py``, item 11 (typography) by
``test_typography.py``; the others that a test can hold are here.
"""

from __future__ import annotations

import re

import pytest
import yaml

import parallel_budget as pb
from conftest import ROOT
from parallel_budget.answers.diagnose import MISTAKES, ring_send

BOOK = ROOT / "book"


# ---------------------------------------------------------------- item 2: the named mistake ring_fraction


def test_ring_fraction_feedback_agrees_with_the_two_phases():
    """Does the 'forgot (R-1)/R' feedback count R-1 rounds per phase (2(R-1) in all), as chapter 2 does?"""
    message = MISTAKES["ring_fraction"]
    assert "两个阶段各 R-1 轮" in message and "每轮只发 G/R" in message
    assert not re.search(r"只发送 R-1 轮", message)
    assert pb.ring_allreduce(4, "2 GB", "25 GB/s").steps == 2 * (4 - 1)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_ring_fraction_is_the_answer_without_the_fraction(ranks):
    """Is the value behind that feedback 2·G, what 2(R-1)/R·G becomes without (R-1)/R?"""
    exp = ring_send(ranks, "2 GB", "25 GB/s")
    value = dict(exp.mistakes)["ring_fraction"]
    assert abs(value.to("GB").magnitude - 4) < 1e-9


# ---------------------------------------------------------------- item 4: GPipe's activations in bytes


@pytest.mark.parametrize("stages, micro", [(4, 8), (4, 32), (8, 32), (8, 4)])
def test_gpipe_holds_about_one_batch_and_1f1b_p_over_m(stages, micro):
    """At a fixed batch, does GPipe hold one batch of activations whatever m is, and 1F1B min(p, m)/m of it?"""
    gpipe = pb.pipeline_in_flight(stages, micro, "gpipe")
    f1b = pb.pipeline_in_flight(stages, micro, "1f1b")
    assert gpipe.peak == micro and gpipe.batch_fraction == 1
    assert f1b.batch_fraction == pytest.approx(min(stages, micro) / micro)


def paragraphs(path) -> list:
    return [p for p in re.split(r"\n\s*\n|\n(?=\s*[-*] |\s*\d+\. )", path.read_text(encoding="utf-8")) if p.strip()]


@pytest.mark.parametrize("page", ["tp-pp.md", "exercises.md"])
def test_pages_count_gpipe_activations_in_bytes_too(page):
    """Does every paragraph that counts GPipe's m microbatches also say it is about one whole batch?"""
    found = [p for p in paragraphs(BOOK / page) if "GPipe" in p and re.search(r"全部 \$m\$ 个", p)]
    assert found, page
    for p in found:
        assert "一整批" in p, p[:200]


# ---------------------------------------------------------------- item 5: not only TP shrinks a layer


@pytest.mark.parametrize("page", ["tp-pp.md", "exercises.md"])
def test_tp_is_not_the_only_way_to_shrink_a_layer(page):
    """Is 'only TP makes a layer smaller' gone, and sequence parallelism named beside TP?"""
    text = (BOOK / page).read_text(encoding="utf-8")
    assert not re.search(r"只有 TP 能", text)
    assert "序列并行" in text


# ---------------------------------------------------------------- item 6: what activations depend on


@pytest.mark.parametrize("page", ["zero-memory.md", "exercises.md"])
def test_activations_are_not_said_to_follow_the_batch_only(page):
    """Is 'activations change only with the per-rank batch' gone, replaced by 'not with the ZeRO stage'?"""
    text = (BOOK / page).read_text(encoding="utf-8")
    assert "只随每 rank 的 batch" not in text
    assert "不随 ZeRO 阶段变化" in text and "序列长度" in text


# ---------------------------------------------------------------- item 7: Adam, AdamW and weight decay


def test_weight_decay_claim_is_scoped_to_l2_adam():
    """Does chapter 5 tie the weight-decay effect to L2 Adam(weight_decay=...) and exempt AdamW?"""
    text = (BOOK / "debugging.md").read_text(encoding="utf-8")
    sentence = next(s for s in text.split("。") if "衰减" in s)
    assert "Adam(weight_decay=" in sentence and "AdamW" in sentence and "不受影响" in sentence


def test_the_buggy_weight_solution_says_sgd():
    """Does the bank's 'effective learning rate 1/R' come with the SGD it holds for?"""
    from parallel_budget import questions

    q = questions.get("update.nb01_buggy_w")
    solution = q.solution(q.generate(0))
    assert "1/R" in solution and "SGD" in solution


# ---------------------------------------------------------------- item 8: how many chapters


def numbered_chapters() -> list:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [c["file"].split("/")[-1] for part in toc["parts"] if part.get("numbered") for c in part["chapters"]]


def test_the_intro_counts_and_lists_every_numbered_chapter():
    """Does the intro say as many chapters as the table of contents numbers, and route through each?"""
    chapters = numbered_chapters()
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    said = re.search(r"分为 (\d+) 章", intro)
    assert said and int(said.group(1)) == len(chapters)
    route = intro.split("## 本课的路线", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| \{doc\}`([\w-]+)`", route, re.M) == chapters


# ---------------------------------------------------------------- items 3, 12, 13: wording


def test_reworded_sentences_stay_reworded():
    """Are the unconditional bound, the borderline lab sentence and the awkward phrases gone?"""
    ring = (BOOK / "ring-allreduce.md").read_text(encoding="utf-8")
    assert "真实的通信时间只会比它长" not in ring and "只要用的是 ring" in ring
    assert "三个常见算错" not in ring and "两端都没有计算陪着" not in ring
    lab = (ROOT / "parallel_budget" / "labs" / "ring_allreduce.py").read_text(encoding="utf-8")
    assert "验证协议与算术" not in lab


# ---------------------------------------------------------------- item 9: units in the labs


def test_bucket_cap_is_labelled_in_mib():
    """Is DDP's bucket_cap_mb shown as MiB (PyTorch counts 2^20 bytes), not MB?"""
    from parallel_budget.labs import overlap

    assert "MiB" in overlap.OPTIONS["bucket_caps_mb"].help
    assert "（MB）" not in overlap.OPTIONS["bucket_caps_mb"].help
