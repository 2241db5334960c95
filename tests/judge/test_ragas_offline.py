"""The offline stand-ins for RAGAS's later tasks (entities, claims, attribution, the two-pass ratings) in both
languages, on RAGAS's documented examples and the seeds' 张伟 case."""

from __future__ import annotations

import asyncio

from ragsql.judge import kinds as k
from ragsql.judge.offline import OfflineJudge

TAJ = (
    "The Taj Mahal is an ivory-white marble mausoleum on the right bank of the river Yamuna in the Indian city of "
    "Agra. It was commissioned in 1631 by the Mughal emperor Shah Jahan to house the tomb of his favorite wife, "
    "Mumtaz Mahal."
)
TAJ_HIGH = (
    "The Taj Mahal is a symbol of love and architectural marvel located in Agra, India. It was built by the "
    "Mughal emperor Shah Jahan in memory of his beloved wife, Mumtaz Mahal."
)
ZW_CONTEXTS = ["牛顿发现了万有引力。", "张伟 教研部工程师，他最近在负责课程研发。"]


def verdict(request):
    got, record = asyncio.run(OfflineJudge().judge(request))
    assert got is not None, record.error
    return got


def test_entities_of_the_taj_mahal_example_give_ragas_four_of_six():
    """The offline entities of RAGAS's reference hold its six entities; those of the high-recall context hold
    four of them, as RAGAS's worked example (4/6)."""
    reference = set(verdict(k.entities.request(TAJ)).entities)
    context = set(verdict(k.entities.request(TAJ_HIGH)).entities)
    assert {"Taj Mahal", "Yamuna", "Agra", "1631", "Shah Jahan", "Mumtaz Mahal"} <= reference
    assert reference & context >= {"Taj Mahal", "Agra", "Shah Jahan", "Mumtaz Mahal"}
    assert "1631" not in context and "Yamuna" not in context


def test_chinese_entities_are_names_and_numbers():
    """张伟 and 教研部 are found in the reference and the context alike; 1905年's number too."""
    assert "张伟" in verdict(k.entities.request("张伟是教研部的成员。")).entities
    assert "张伟" in verdict(k.entities.request("\n".join(ZW_CONTEXTS))).entities
    assert "1905" in "".join(verdict(k.entities.request("爱因斯坦在1905年提出狭义相对论。")).entities)


def test_claims_follow_atomicity_and_coverage():
    """High atomicity splits clauses, low keeps sentences; low coverage keeps the pieces with a name or number."""
    text = (
        "Albert Einstein was a German physicist. His theory changed how physicists think about space; the "
        "idea spread quickly among young researchers."
    )
    high = verdict(k.claims.request(text, atomicity="high", coverage="high")).claims
    low = verdict(k.claims.request(text, atomicity="low", coverage="high")).claims
    assert len(high) > len(low) == 2
    assert verdict(k.claims.request(text, atomicity="low", coverage="low")).claims == [low[0]]
    zh = verdict(k.claims.request("张伟是教研部的，最近在负责课程研发。", atomicity="high", coverage="high")).claims
    assert len(zh) == 2


def test_attribution_names_each_supporting_context():
    """Each statement is attributed to the contexts that support it on their own."""
    got = verdict(k.attribution.request(["张伟是教研部的", "牛顿发现了万有引力"], ZW_CONTEXTS))
    assert [v.contexts for v in got.verdicts] == [[2], [1]]


def test_two_pass_ratings_rank_grounded_above_ungrounded_in_both_languages():
    """A copied answer rates 2 in both passes, an invented one 0; the question about 张伟 finds its context
    relevant (2) and the Newton context alone not (0)."""
    for n in (1, 2):
        assert verdict(k.groundedness.request("张伟是教研部的工程师。", ZW_CONTEXTS, judge_pass=n)).rating == 2
        assert verdict(k.groundedness.request("Bananas are blue and grow on Mars.", [TAJ], judge_pass=n)).rating == 0
        assert verdict(k.context_rating.request("张伟是哪个部门的？", ZW_CONTEXTS, judge_pass=n)).rating == 2
        assert verdict(k.context_rating.request("张伟是哪个部门的？", ZW_CONTEXTS[:1], judge_pass=n)).rating == 0
        assert (
            verdict(k.context_rating.request("When was the Taj Mahal commissioned?", [TAJ], judge_pass=n)).rating == 2
        )
