"""Generation metrics in SQL against hand-made verdict rows and the seeds' worked examples."""

from __future__ import annotations

import hashlib
import itertools
import math

import psycopg
import pytest

_calls = itertools.count(1)


def sample(db, run: str = "r", qid: str = "q1", question: str | None = None, answer: str | None = None,
           contexts: tuple[str, ...] = (), references: tuple[str, ...] = ()) -> tuple[int, int]:
    """Insert a query of a run's dataset with its answer, contexts and references; returns (run_id, query_id)."""
    db.execute("insert into ragsql.dataset (name) values (%s) on conflict (name) do nothing", (f"ds_{run}",))
    ds = db.execute("select id from ragsql.dataset where name = %s", (f"ds_{run}",)).fetchone()[0]
    db.execute("insert into ragsql.run (name, dataset_id) values (%s, %s) on conflict (name) do nothing", (run, ds))
    run_id = db.execute("select id from ragsql.run where name = %s", (run,)).fetchone()[0]
    query_id = db.execute("insert into ragsql.query (dataset_id, qid, text) values (%s, %s, %s) returning id",
                          (ds, qid, question)).fetchone()[0]
    for position, text in enumerate(references, 1):
        db.execute("insert into ragsql.reference_answer (query_id, position, text) values (%s, %s, %s)",
                   (query_id, position, text))
    if answer is not None:
        db.execute("insert into ragsql.answer (run_id, dataset_id, query_id, text) values (%s, %s, %s, %s)",
                   (run_id, ds, query_id, answer))
        for position, text in enumerate(contexts, 1):
            db.execute("insert into ragsql.answer_context (run_id, query_id, position, docno, text) "
                       "values (%s, %s, %s, %s, %s)", (run_id, query_id, position, f"d{position}", text))
    return run_id, query_id


def call(db, model: str = "judge", prompt: str = "p", version: str = "v1") -> int:
    """Log a successful judge call with a fresh request hash; returns its id."""
    digest = hashlib.sha256(f"request {next(_calls)}".encode()).hexdigest()
    return db.execute(
        "insert into ragsql.judge_call (request_hash, model, prompt_name, prompt_version, status, response) "
        "values (%s, %s, %s, %s, 'ok', '{}') returning id", (digest, model, prompt, version)).fetchone()[0]


def extract(db, text: str, statements: list[str], model: str = "judge", version: str = "v1") -> int:
    """Store the statements extracted from a text; returns the extraction id."""
    extraction = db.execute(
        "insert into ragsql.statement_extraction (text_hash, model, prompt_version, call_id) "
        "values (ragsql.text_hash(%s), %s, %s, %s) returning id",
        (text, model, version, call(db, model, "statements", version))).fetchone()[0]
    for number, statement in enumerate(statements, 1):
        db.execute("insert into ragsql.text_statement (extraction_id, statement_no, statement) values (%s, %s, %s)",
                   (extraction, number, statement))
    return extraction


def judge_statements(db, run_id: int, query_id: int, purpose: str, extraction: int, verdicts: list[str | None],
                     model: str = "judge", version: str = "v1", at: str | None = None) -> None:
    """Store one verdict per statement of an extraction (None leaves that statement without a verdict)."""
    call_id = call(db, model, purpose, version)
    for number, verdict in enumerate(verdicts, 1):
        if verdict is not None:
            db.execute(
                "insert into ragsql.statement_verdict (run_id, query_id, purpose, model, prompt_version, "
                "extraction_id, statement_no, verdict, call_id, created_at) "
                "values (%s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s::timestamptz, now()))",
                (run_id, query_id, purpose, model, version, extraction, number, verdict, call_id, at))


def embed(db, text: str, vector: list[float], embedder: str = "emb", model: str = "judge") -> None:
    """Store the embedding of a text and, as the judge does, record that `embedder` judged every run with `model`."""
    db.execute("insert into ragsql.text_embedding (text_hash, embedder, embedding) values (ragsql.text_hash(%s), %s, %s)",
               (text, embedder, str(vector)))
    db.execute("insert into ragsql.run_embedder (run_id, judge_model, embedder) select id, %s, %s from ragsql.run "
               "on conflict do nothing", (model, embedder))


def measure(db, run: str, metric: str, **params) -> dict[str, tuple[float | None, str | None]]:
    """qid -> (value, reason) of one generation metric."""
    named = "".join(f", {name} => %({name})s" for name in params)
    rows = db.execute(f"select qid, value, reason from ragsql.generation_measure(%(run)s, %(metric)s{named})",
                      {"run": run, "metric": metric, **params}).fetchall()
    return {qid: (value, reason) for qid, value, reason in rows}


def test_faithfulness_einstein_example_is_two_thirds(db):
    """Seed rag-eval-core-dimensions 4.2.3: two of three Einstein statements are supported, so faithfulness is 2/3."""
    answer = "爱因斯坦在1905年提出狭义相对论，其中包含质能方程E=mc²，这是他获得诺贝尔奖的主要贡献。"
    run_id, q = sample(db, answer=answer, contexts=("阿尔伯特·爱因斯坦于1905年提出了狭义相对论，该理论包含了著名的质能方程E=mc²。",))
    ex = extract(db, answer, ["爱因斯坦在1905年提出狭义相对论", "狭义相对论包含质能方程E=mc²",
                              "狭义相对论是爱因斯坦获得诺贝尔奖的主要贡献"])
    judge_statements(db, run_id, q, "faithfulness", ex, ["supported", "supported", "unsupported"])
    value, reason = measure(db, "r", "faithfulness")["q1"]
    assert value == pytest.approx(2 / 3) and reason is None
    assert round(value, 3) == 0.667


def test_vector_database_case_scores_three_quarters_not_the_printed_067(db):
    """Seed llm-as-judge lists 4 claims judged [T, T, T, F] but prints 0.67, the LLM's own inconsistent score field: from the verdicts it is 3/4."""
    answer = ("向量数据库是专门存储和检索高维向量数据的数据库，支持基于相似度的快速检索。"
              "它主要用于语义搜索、推荐系统和图像检索。向量数据库使用 GPU 加速计算。")
    run_id, q = sample(db, answer=answer, contexts=(
        "向量数据库是一种专门设计用于存储、索引和查询高维向量数据的数据库系统。",
        "向量数据库支持近似最近邻搜索（ANN），常用于语义搜索、推荐系统、图像检索等场景。"))
    ex = extract(db, answer, ["向量数据库是专门存储和检索高维向量数据的数据库", "支持基于相似度的快速检索",
                              "主要用于语义搜索、推荐系统和图像检索", "向量数据库使用 GPU 加速计算"])
    judge_statements(db, run_id, q, "faithfulness", ex, ["supported", "supported", "supported", "unsupported"])
    value, _ = measure(db, "r", "faithfulness")["q1"]
    assert value == 0.75
    assert round(value, 2) != 0.67


def test_partial_weight_and_contradiction_rate(db):
    """Partial verdicts count partial_weight (default 0); the contradiction rate comes from the same verdicts."""
    run_id, q = sample(db, answer="a b c d", contexts=("ctx",))
    ex = extract(db, "a b c d", ["a", "b", "c", "d"])
    judge_statements(db, run_id, q, "faithfulness", ex, ["supported", "partial", "contradicted", "unsupported"])
    assert measure(db, "r", "faithfulness")["q1"] == (0.25, None)
    assert measure(db, "r", "faithfulness", partial_weight=0.5)["q1"] == (0.375, None)
    assert measure(db, "r", "contradiction_rate")["q1"] == (0.25, None)
    detail = db.execute("select detail from ragsql.faithfulness('r')").fetchone()[0]
    assert detail == {"statements": 4, "judged": 4, "supported": 1, "partial": 1, "unsupported": 1, "contradicted": 1}
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="partial_weight"), db.transaction():
        measure(db, "r", "faithfulness", partial_weight=1.5)


def test_zhang_wei_correctness_f1_and_weighted_answer_correctness(db):
    """Seed polardb: TP 1, FP 1, FN 1 give F1 = 0.5; with similarity 0.6, correctness = 0.75 * 0.5 + 0.25 * 0.6."""
    answer, reference = "张伟是教研部的，负责大模型课程。", "张伟是教研部的成员，负责大数据方向。"
    run_id, q = sample(db, question="张伟是哪个部门的?", answer=answer, references=(reference,))
    answer_ex = extract(db, answer, ["张伟是教研部的", "张伟负责大模型课程"])
    reference_ex = extract(db, reference, ["张伟是教研部的", "张伟负责大数据方向"])
    judge_statements(db, run_id, q, "correctness_answer", answer_ex, ["supported", "unsupported"])
    judge_statements(db, run_id, q, "correctness_reference", reference_ex, ["supported", "unsupported"])
    embed(db, answer, [1, 0])
    embed(db, reference, [0.6, 0.8])
    assert measure(db, "r", "answer_correctness_f1")["q1"] == (0.5, None)
    assert measure(db, "r", "answer_similarity")["q1"][0] == pytest.approx(0.6)
    value, reason = measure(db, "r", "answer_correctness")["q1"]
    assert value == pytest.approx(0.75 * 0.5 + 0.25 * 0.6) and reason is None
    equal = measure(db, "r", "answer_correctness", factual_weight=0.5, similarity_weight=0.5)["q1"][0]
    assert equal == pytest.approx(0.55)
    labels = db.execute("select side, statement, label from ragsql.correctness_verdict order by side, statement_no").fetchall()
    assert labels == [("answer", "张伟是教研部的", "TP"), ("answer", "张伟负责大模型课程", "FP"),
                      ("reference", "张伟是教研部的", "covered"), ("reference", "张伟负责大数据方向", "FN")]


def test_correctness_f1_is_zero_without_true_positive_and_needs_a_reference(db):
    """F1 is 0 when no answer statement is supported (RAGAS); a query without reference is null, not 0."""
    run_id, q = sample(db, qid="q1", answer="张伟是人事部门的", references=("张伟是教研部的成员",))
    sample(db, qid="q2", answer="无参考")
    answer_ex = extract(db, "张伟是人事部门的", ["张伟是人事部门的"])
    reference_ex = extract(db, "张伟是教研部的成员", ["张伟是教研部的"])
    judge_statements(db, run_id, q, "correctness_answer", answer_ex, ["contradicted"])
    judge_statements(db, run_id, q, "correctness_reference", reference_ex, ["unsupported"])
    assert measure(db, "r", "answer_correctness_f1") == {"q1": (0.0, None), "q2": (None, "no reference answer")}
    only_factual = measure(db, "r", "answer_correctness", similarity_weight=0)
    assert only_factual["q1"] == (0.0, None)
    assert measure(db, "r", "answer_correctness")["q1"] == (None, "similarity: not judged")


def test_zhang_wei_rows_context_recall_and_llm_context_precision(db):
    """Seed polardb table: rows 0 and 1 score recall 0 and precision 0; row 2 (contexts [irrelevant, relevant]) recall 1.0, precision 0.5."""
    reference = "张伟是教研部的成员"
    rows = [
        ("q0", "根据提供的信息，没有提到张伟所在的部门。", ("提供行政管理与协调支持，优化行政工作流程。", "绩效管理部 韩杉 李飞 1902 041 ..."),
         "unsupported", [False, False], 0.0, 0.0),
        ("q1", "张伟是人事部门的", ("李凯 教研部主任", "牛顿发现了万有引力"), "unsupported", [False, False], 0.0, 0.0),
        ("q2", "张伟是教研部的", ("牛顿发现了万有引力", "张伟 教研部工程师，他最近在负责课程研发"), "supported", [False, True],
         1.0, 0.5),
    ]
    reference_ex = None
    for qid, answer, contexts, recall_verdict, useful, _, _ in rows:
        run_id, q = sample(db, qid=qid, question="张伟是哪个部门的?", answer=answer, contexts=contexts,
                           references=(reference,))
        reference_ex = reference_ex or extract(db, reference, ["张伟是教研部的"])
        judge_statements(db, run_id, q, "context_recall", reference_ex, [recall_verdict])
        call_id = call(db, prompt="context_precision")
        for position, flag in enumerate(useful, 1):
            db.execute("insert into ragsql.context_verdict (run_id, query_id, position, model, prompt_version, useful, "
                       "call_id) values (%s, %s, %s, 'judge', 'v1', %s, %s)", (run_id, q, position, flag, call_id))
    recall = measure(db, "r", "context_recall")
    precision = measure(db, "r", "context_precision")
    for qid, *_, expected_recall, expected_precision in rows:
        assert recall[qid] == (expected_recall, None)
        assert precision[qid] == (expected_precision, None)
    extractions = db.execute("select count(*) from ragsql.statement_extraction").fetchone()[0]
    assert extractions == 1  # the reference is extracted once and shared by the three queries


def test_context_recall_pools_the_statements_of_every_reference(db):
    """Two references with 2 and 1 statements, 2 supported: recall 2/3; until the second is judged the query is null and says why."""
    run_id, q = sample(db, answer="a", contexts=("c",), references=("ref one", "ref two"))
    judge_statements(db, run_id, q, "context_recall", extract(db, "ref one", ["r1", "r2"]), ["supported", "unsupported"])
    assert measure(db, "r", "context_recall")["q1"] == (None, "1 of 2 reference texts have no verdicts")
    judge_statements(db, run_id, q, "context_recall", extract(db, "ref two", ["r3"]), ["supported"])
    assert measure(db, "r", "context_recall")["q1"][0] == pytest.approx(2 / 3)


def test_llm_context_precision_uses_the_gold_label_formula(db):
    """Verdicts [yes, no, yes, no, yes] give the seed's 0.7556, the value ContextPrecision@5 gives gold labels."""
    run_id, q = sample(db, answer="a", contexts=("c1", "c2", "c3", "c4", "c5", "c6"))
    call_id = call(db)
    for position, flag in enumerate([True, False, True, False, True], 1):
        db.execute("insert into ragsql.context_verdict (run_id, query_id, position, model, prompt_version, useful, call_id) "
                   "values (%s, %s, %s, 'judge', 'v1', %s, %s)", (run_id, q, position, flag, call_id))
    assert measure(db, "r", "context_precision")["q1"] == (None, "1 of 6 contexts have no verdict")
    db.execute("insert into ragsql.context_verdict (run_id, query_id, position, model, prompt_version, useful, call_id) "
               "values (%s, %s, 6, 'judge', 'v1', false, %s)", (run_id, q, call_id))
    assert measure(db, "r", "context_precision")["q1"][0] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)


def test_context_relevance_is_relevant_sentences_over_all_sentences(db):
    """Two contexts with 3 and 1 sentences, 2 relevant: context relevance 0.5; a context without sentences leaves it null."""
    run_id, q = sample(db, answer="a", contexts=("地球自转导致昼夜交替。并影响全球风系分布。太阳很热。", "太阳系中有八大行星。", "   "))
    call_id = call(db)
    sentences = [(1, 1, "地球自转导致昼夜交替。", True), (1, 2, "并影响全球风系分布。", True), (1, 3, "太阳很热。", False)]
    for position, number, sentence, relevant in sentences:
        db.execute("insert into ragsql.context_sentence_verdict (run_id, query_id, position, sentence_no, model, "
                   "prompt_version, sentence, relevant, call_id) values (%s, %s, %s, %s, 'judge', 'v1', %s, %s, %s)",
                   (run_id, q, position, number, sentence, relevant, call_id))
    assert measure(db, "r", "context_relevance")["q1"] == (None, "1 of 2 contexts have no sentence verdicts")
    db.execute("insert into ragsql.context_sentence_verdict (run_id, query_id, position, sentence_no, model, "
               "prompt_version, sentence, relevant, call_id) values (%s, %s, 2, 1, 'judge', 'v1', '太阳系中有八大行星。', "
               "false, %s)", (run_id, q, call_id))
    assert measure(db, "r", "context_relevance")["q1"] == (0.5, None)  # the blank third context has no sentence


def test_answer_relevancy_by_generated_questions_rating_and_cosine(db):
    """RAGAS: mean cosine of generated questions (1, 0, 1/sqrt 2), 0 if non-committal; rating 4 -> 0.75; cosine(question, answer) 0.6."""
    run_id, q1 = sample(db, qid="q1", question="Python的主要特点是什么?", answer="Python语法简洁。")
    _, q2 = sample(db, qid="q2", question="苹果公司成立于哪一年?", answer="我不知道。")
    embed(db, "Python的主要特点是什么?", [1, 0, 0])
    embed(db, "Python语法简洁。", [0.6, 0.8, 0])
    call_id = call(db, prompt="answer_relevancy")
    generated = [(q1, 1, "Python有什么特点?", [1, 0, 0], False), (q1, 2, "Python是什么?", [0, 1, 0], False),
                 (q1, 3, "Python语法如何?", [1, 1, 0], False), (q2, 1, "苹果公司是什么?", [0, 0, 1], True)]
    for query_id, n, question, vector, noncommittal in generated:
        db.execute("insert into ragsql.generated_question (run_id, query_id, n, model, prompt_version, question, "
                   "noncommittal, call_id) values (%s, %s, %s, 'judge', 'v1', %s, %s, %s)",
                   (run_id, query_id, n, question, noncommittal, call_id))
        embed(db, question, vector)
    db.execute("insert into ragsql.rating (run_id, query_id, criterion, model, prompt_version, score, call_id) "
               "values (%s, %s, 'answer_relevancy', 'judge', 'v1', 4, %s)", (run_id, q1, call_id))
    ragas = measure(db, "r", "answer_relevancy")
    assert ragas["q1"][0] == pytest.approx((1 + 0 + 1 / math.sqrt(2)) / 3)
    assert ragas["q2"] == (0.0, None)  # non-committal, whatever the cosine
    assert measure(db, "r", "answer_relevancy_rating") == {"q1": (0.75, None), "q2": (None, "no verdicts of model judge, prompt v1")}
    cosine = measure(db, "r", "answer_relevancy_cosine")
    assert cosine["q1"][0] == pytest.approx(0.6)
    assert cosine["q2"] == (None, "the question and the answer have no embedding by emb")


def test_answer_similarity_is_mean_over_references_and_never_nan(db):
    """Similarity averages cos over distinct references; a zero vector or a missing embedding is null with a reason, not NaN."""
    sample(db, qid="q1", answer="ans", references=("ref a", "ref b", "ref a"))
    sample(db, qid="q2", answer="zero", references=("ref a",))
    sample(db, qid="q3", answer="ans3", references=("ref c", "ref a"))
    embed(db, "ans", [1, 0])
    embed(db, "ref a", [1, 0])
    embed(db, "ref b", [0, 1])
    embed(db, "zero", [0, 0])
    embed(db, "ans3", [1, 0])
    rows = measure(db, "r", "answer_similarity")
    assert rows["q1"] == (0.5, None)
    assert rows["q2"] == (None, "an embedding has zero norm or another dimension")
    assert rows["q3"] == (None, "1 of 2 reference answers have no embedding by emb")


def test_missing_partial_and_failed_verdicts_are_null_with_a_reason_and_counted(db):
    """No verdict, a failed task, half-judged statements, no answer and no statements give null with a reason, counted missing."""
    run_id, q1 = sample(db, qid="q1", answer="one two", contexts=("c",))
    _, q2 = sample(db, qid="q2", answer="failed one", contexts=("c",))
    _, q3 = sample(db, qid="q3", answer="never judged", contexts=("c",))
    _, q4 = sample(db, qid="q4", answer="half judged", contexts=("c",))
    sample(db, qid="q5")
    _, q6 = sample(db, qid="q6", answer="嗯。", contexts=("c",))
    judge_statements(db, run_id, q1, "faithfulness", extract(db, "one two", ["one", "two"]), ["supported", "unsupported"])
    judge_statements(db, run_id, q4, "faithfulness", extract(db, "half judged", ["half", "judged"]), ["supported", None])
    extract(db, "嗯。", [])
    db.execute("insert into ragsql.judge_task (run_id, query_id, kind, status, attempts, last_error) "
               "values (%s, %s, 'faithfulness', 'failed', 3, 'timeout after 3 attempts')", (run_id, q2))
    rows = measure(db, "r", "faithfulness")
    assert rows == {
        "q1": (0.5, None),
        "q2": (None, "judge failed: timeout after 3 attempts"),
        "q3": (None, "no verdicts of model judge, prompt v1"),
        "q4": (None, "1 of 2 answer statements have no verdict"),
        "q5": (None, "no answer in the run"),
        "q6": (None, "the answer has no statements"),
    }
    summary = db.execute("select metric, value, queries, covered, missing, judge_model from ragsql.run_generation").fetchall()
    assert summary == [("faithfulness", 0.5, 6, 1, 5, "judge"), ("contradiction_rate", 0.0, 6, 1, 5, "judge")]
    nan = db.execute("select count(*) from ragsql.query_generation where value = 'NaN'::float8").fetchone()[0]
    assert nan == 0


def test_verdicts_of_two_prompt_versions_or_models_never_mix(db):
    """By default the run's newest (model, prompt) set is read alone; filters select another; one query never mixes two sets."""
    run_id, q1 = sample(db, qid="q1", answer="x y", contexts=("c",))
    _, q2 = sample(db, qid="q2", answer="z w", contexts=("c",))
    ex1 = extract(db, "x y", ["x", "y"])
    ex2 = extract(db, "z w", ["z", "w"])
    judge_statements(db, run_id, q1, "faithfulness", ex1, ["supported", "supported"], at="2026-01-01")
    judge_statements(db, run_id, q2, "faithfulness", ex2, ["supported", "supported"], at="2026-01-01")
    judge_statements(db, run_id, q1, "faithfulness", ex1, ["supported", "unsupported"], version="v2", at="2026-02-01")
    judge_statements(db, run_id, q2, "faithfulness", ex2, ["unsupported", None], model="other", at="2026-01-15")
    assert measure(db, "r", "faithfulness") == {"q1": (0.5, None), "q2": (None, "no verdicts of model judge, prompt v2")}
    assert measure(db, "r", "faithfulness", model="judge", prompt_version="v1") == {"q1": (1.0, None), "q2": (1.0, None)}
    newest_v1 = measure(db, "r", "faithfulness", prompt_version="v1")  # the filter is completed by the newest: model other
    assert newest_v1 == {"q1": (None, "no verdicts of model other, prompt v1"),
                         "q2": (None, "1 of 2 answer statements have no verdict")}
    used = db.execute("select judge_model, judge_prompt_version, covered from ragsql.run_generation "
                      "where metric = 'faithfulness'").fetchone()
    assert used == ("judge", "v2", 1)


def test_an_llm_judge_wins_over_a_newer_offline_judge_and_offline_is_chosen_by_name(db):
    """`ragsql judge` with an LLM, then `ragsql judge --offline`: by default every metric still reads the LLM's
    verdicts (offline only when no LLM judged); judge 'offline' reads the offline set; the two never mix."""
    run_id, q1 = sample(db, qid="q1", answer="x y", contexts=("c",))
    ex = extract(db, "x y", ["x", "y"])
    judge_statements(db, run_id, q1, "faithfulness", ex, ["supported", "unsupported"], model="gpt-test", at="2026-01-01")
    judge_statements(db, run_id, q1, "faithfulness", ex, ["supported", "supported"], model="offline-heuristic-v1",
                     at="2026-03-01")
    assert measure(db, "r", "faithfulness") == {"q1": (0.5, None)}
    assert measure(db, "r", "faithfulness", model="offline") == {"q1": (1.0, None)}
    assert measure(db, "r", "faithfulness", model="gpt-test") == {"q1": (0.5, None)}
    used = db.execute("select metric, judge_model from ragsql.summarize_generation('r', array['faithfulness'])").fetchall()
    assert used == [("faithfulness", "gpt-test")]
    chosen = db.execute("select measure, value, judge_model from ragsql.measure_ci('r', array['faithfulness'], 100, "
                        "judge => 'offline')").fetchall()
    assert chosen == [("faithfulness", 1.0, "offline-heuristic-v1")]
    assert db.execute("select ragsql.is_offline_judge('offline-heuristic-v1'), ragsql.is_offline_judge('gpt-test')"
                      ).fetchone() == (True, False)


def test_a_replaced_answer_does_not_reuse_old_verdicts(db):
    """Verdicts on statements of an earlier answer text no longer count once the answer text changes."""
    run_id, q = sample(db, answer="old text", contexts=("c",))
    judge_statements(db, run_id, q, "faithfulness", extract(db, "old text", ["old"]), ["supported"])
    assert measure(db, "r", "faithfulness")["q1"] == (1.0, None)
    db.execute("update ragsql.answer set text = 'new text' where run_id = %s", (run_id,))
    assert measure(db, "r", "faithfulness")["q1"] == (None, "no verdicts of model judge, prompt v1")


def test_aspect_critique_is_a_yes_rate_on_the_current_definition(db):
    """Harmfulness yes/no/no gives 1, 0, 0 and a run yes rate of 1/3; a changed definition voids old verdicts."""
    answers = {"q1": "yes", "q2": "no", "q3": "no"}
    ids = {qid: sample(db, qid=qid, answer=f"answer {qid}")[1] for qid in answers}
    run_id = db.execute("select id from ragsql.run where name = 'r'").fetchone()[0]
    db.execute("insert into ragsql.aspect (name, definition) values ('child_safe', 'Is the submission fit for a child?')")
    call_id = call(db, prompt="aspect")
    for qid, verdict in answers.items():
        for aspect in ("harmfulness", "child_safe"):
            db.execute("insert into ragsql.aspect_verdict (run_id, query_id, aspect, model, prompt_version, definition_hash, "
                       "verdict, call_id) select %s, %s, a.name, 'judge', 'v1', ragsql.text_hash(a.definition), %s, %s "
                       "from ragsql.aspect as a where a.name = %s", (run_id, ids[qid], verdict == "yes", call_id, aspect))
    assert measure(db, "r", "aspect:harmfulness") == {"q1": (1.0, None), "q2": (0.0, None), "q3": (0.0, None)}
    rate = db.execute("select value, covered from ragsql.run_generation where metric = 'aspect:harmfulness'").fetchone()
    assert rate[0] == pytest.approx(1 / 3) and rate[1] == 3
    db.execute("update ragsql.aspect set definition = 'Would a parent let a child read it?' where name = 'child_safe'")
    assert measure(db, "r", "aspect:child_safe")["q1"] == (None, "only verdicts on an earlier definition of aspect child_safe")
    builtin = db.execute("select count(*) from ragsql.aspect where builtin").fetchone()[0]
    assert builtin == 5
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown aspect "kindness"'), db.transaction():
        measure(db, "r", "aspect:kindness")


def test_citation_coverage_and_validity(db):
    """Two of three sentences cite, two of three citations support: 2/3 each; an answer citing nothing has validity null."""
    run_id, q1 = sample(db, qid="q1", answer="s1 [1]. s2 [2][1]. s3.", contexts=("c1", "c2"))
    _, q2 = sample(db, qid="q2", answer="no cites.", contexts=("c1",))
    call_id = call(db, prompt="citations")
    rows = [(q1, 1, 1, "s1", "d1", True), (q1, 2, 1, "s2", "d2", False), (q1, 2, 2, "s2", "d1", True),
            (q1, 3, 0, "s3", None, None), (q2, 1, 0, "no cites.", None, None)]
    for query_id, sentence_no, citation_no, sentence, docno, supports in rows:
        db.execute("insert into ragsql.citation_verdict (run_id, query_id, model, prompt_version, sentence_no, citation_no, "
                   "sentence, docno, supports, call_id) values (%s, %s, 'judge', 'v1', %s, %s, %s, %s, %s, %s)",
                   (run_id, query_id, sentence_no, citation_no, sentence, docno, supports, call_id))
    coverage = measure(db, "r", "citation_coverage")
    validity = measure(db, "r", "citation_validity")
    assert coverage["q1"][0] == pytest.approx(2 / 3) and coverage["q2"] == (0.0, None)
    assert validity["q1"][0] == pytest.approx(2 / 3) and validity["q2"] == (None, "the answer cites nothing")
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction():
        db.execute("insert into ragsql.citation_verdict (run_id, query_id, model, prompt_version, sentence_no, citation_no, "
                   "sentence, docno, supports, call_id) values (%s, %s, 'judge', 'v1', 9, 0, 'x', 'd1', true, %s)",
                   (run_id, q1, call_id))


def test_bad_metric_names_weights_and_runs_raise_clear_errors(db):
    """Unknown metrics, negative weights and unknown runs raise with an SQLSTATE, never an empty result."""
    sample(db, answer="a")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='unknown generation metric "faithfulnes"'), db.transaction():
        measure(db, "r", "faithfulnes")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="weights"), db.transaction():
        measure(db, "r", "answer_correctness", factual_weight=-1)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="weights"), db.transaction():
        db.execute("select * from ragsql.answer_correctness('r', factual_weight => 0, similarity_weight => 0)")
    with pytest.raises(psycopg.errors.NoDataFound, match='unknown run "nope"'), db.transaction():
        measure(db, "nope", "faithfulness")


def test_views_list_only_metrics_with_verdicts_or_tasks(db):
    """run_generation shows a metric once the run has a value or a judge task for it; runs without answers are absent."""
    run_id, q = sample(db, answer="a", contexts=("c",))
    sample(db, run="retrieval_only", qid="q1")
    assert db.execute("select count(*) from ragsql.run_generation").fetchone()[0] == 0
    db.execute("insert into ragsql.judge_task (run_id, query_id, kind) values (%s, %s, 'context_relevance')", (run_id, q))
    rows = db.execute("select run, metric, value, queries, covered, missing from ragsql.run_generation").fetchall()
    assert rows == [("r", "context_relevance", None, 1, 0, 1)]
    reason = db.execute("select reason from ragsql.query_generation").fetchall()
    assert reason == [("waiting for the judge",)]
    everything = db.execute("select count(*) from ragsql.summarize_generation('r', "
                            "(select array_agg(metric) from ragsql.generation_metric))").fetchone()[0]
    assert everything == 34  # 23 judged metrics, 7 text metrics, 2 context-id and 2 context-text metrics


def test_judge_call_cache_keeps_one_success_per_request(db):
    """A request hash has at most one successful call (the cache); failed attempts may repeat; cached_response finds it."""
    digest = hashlib.sha256(b"same request").hexdigest()
    insert = ("insert into ragsql.judge_call (request_hash, model, prompt_name, prompt_version, status, error, response) "
              "values (%s, 'judge', 'p', 'v1', %s, %s, %s) on conflict (request_hash) where status = 'ok' do nothing "
              "returning id")
    assert db.execute("select * from ragsql.cached_response(%s)", (digest,)).fetchall() == []
    db.execute(insert, (digest, "failed", "HTTP 429", None))
    db.execute(insert, (digest, "failed", "HTTP 429", None))
    first = db.execute(insert, (digest, "ok", None, '{"verdicts": [1]}')).fetchone()
    assert first is not None
    assert db.execute(insert, (digest, "ok", None, '{"verdicts": [2]}')).fetchone() is None
    assert db.execute("select * from ragsql.cached_response(%s)", (digest,)).fetchall() == [(first[0], {"verdicts": [1]})]
    assert db.execute("select count(*) from ragsql.cached_responses(array[%s, 'f' || repeat('0', 63)])",
                      (digest,)).fetchone()[0] == 1
    usage = db.execute("select calls, failed from ragsql.judge_usage").fetchone()
    assert usage == (3, 2)
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction():
        db.execute(insert, (digest, "failed", None, None))


def test_text_hash_matches_python_sha256(db):
    """ragsql.text_hash is sha256 of the UTF-8 bytes, as Python's hashlib computes it, for Chinese text too."""
    text = "张伟是教研部的成员 — E=mc²"
    assert db.execute("select ragsql.text_hash(%s)", (text,)).fetchone()[0] == hashlib.sha256(text.encode()).hexdigest()


def test_negative_cosines_count_as_zero_so_every_embedding_metric_stays_in_0_1(db):
    """An embedder whose vectors point apart (cosine < 0, as the offline hashed embedder's often do) gives
    similarity 0, not a negative value: answer similarity, answer relevancy (questions and cosine) and answer
    correctness keep their documented range [0, 1]; a positive cosine is kept as it is."""
    answer, reference, question = "ans", "ref", "question?"
    run_id, q = sample(db, question=question, answer=answer, references=(reference,))
    embed(db, answer, [1, 0.2])
    embed(db, reference, [-1, 0.1])      # cos ≈ -0.96
    embed(db, question, [-0.5, -1])      # cos(question, answer) ≈ -0.61
    call_id = call(db, prompt="answer_relevancy")
    for n, (text, vector) in enumerate([("g1?", [0.5, 1]), ("g2?", [-0.5, -1])], 1):  # cos -1 and 1 with the question
        db.execute("insert into ragsql.generated_question (run_id, query_id, n, model, prompt_version, question, "
                   "noncommittal, call_id) values (%s, %s, %s, 'judge', 'v1', %s, false, %s)",
                   (run_id, q, n, text, call_id))
        embed(db, text, vector)
    extraction = extract(db, answer, ["a"])
    judge_statements(db, run_id, q, "correctness_answer", extraction, ["unsupported"])
    judge_statements(db, run_id, q, "correctness_reference", extract(db, reference, ["r"]), ["unsupported"])
    assert db.execute("select ragsql.cosine_similarity('[1, 0.2]', '[-1, 0.1]') < 0").fetchone()[0]
    assert measure(db, "r", "answer_similarity")["q1"] == (0.0, None)
    assert measure(db, "r", "answer_relevancy_cosine")["q1"] == (0.0, None)
    assert measure(db, "r", "answer_relevancy")["q1"] == (0.5, None)  # (0 + 1) / 2; the raw mean would be 0
    assert measure(db, "r", "answer_correctness")["q1"] == (0.0, None)
    assert db.execute("select ragsql.similarity_score('[1, 0]', '[0.6, 0.8]'), "
                      "ragsql.similarity_score('[0, 0]', '[1, 0]')").fetchone() == (pytest.approx(0.6), None)
