"""`ragsql judge-check` and the labelled pairs: the offline judge discriminates (≥ 0.90 pairwise accuracy on the
dev and held-out pairs, and on the cases the issue names), the pairs are what their script writes, bad files are refused
whole, and an LLM judge is measured through the real client."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import psycopg
import pytest

from ragsql.judge import heuristics as h, kinds as k
from ragsql.judge.lexical import content_tokens, has_negation
from tests.conftest import run_cli, use_judge
from tests.fake_openai import FakeOpenAI

PAIRS = Path(__file__).parent / "data" / "judge_pairs"
DEV, HELDOUT = PAIRS / "dev.jsonl", PAIRS / "heldout.jsonl"


@pytest.fixture
def offline_db(fresh_db, monkeypatch):
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return fresh_db


def test_the_pair_files_are_what_their_script_writes(tmp_path):
    runpy.run_path(str(PAIRS / "make_pairs.py"))["main"](tmp_path)
    for name in ("dev.jsonl", "heldout.jsonl"):
        assert (tmp_path / name).read_text("utf-8") == (PAIRS / name).read_text("utf-8"), name
    dev = [json.loads(line) for line in DEV.read_text("utf-8").splitlines()]
    held = [json.loads(line) for line in HELDOUT.read_text("utf-8").splitlines()]
    questions = lambda pairs: {p["id"].split(":")[0] for p in pairs}  # noqa: E731
    assert not questions(dev) & questions(held) and len(dev) > 500 and len(held) > 350
    assert {p["language"] for p in dev} == {"en", "zh"} and len({p["metric"] for p in dev}) == 7


@pytest.mark.parametrize("path, pairs", [(DEV, 558), (HELDOUT, 403)], ids=["dev", "heldout"])
def test_offline_judge_reaches_090_on_every_metric_and_language(offline_db, capsys, path, pairs):
    code, out, err = run_cli(capsys, "judge-check", str(path), "--offline", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["judge"] == "offline" and got["offline"] and got["failed_tasks"] == 0 and got["pairs"] == pairs
    accuracy = {(g["metric"], g["language"]): g["accuracy"] for g in got["groups"]}
    assert len(accuracy) == 14
    # v5 (as v4 here): dev ≥ 0.923 (zh context_relevance and context_precision), held out ≥ 0.917 (en answer_relevancy)
    assert min(accuracy.values()) >= 0.90, accuracy
    assert sum(g["no_value"] for g in got["groups"]) == 0
    with psycopg.connect(offline_db) as conn:  # the pairs' dataset is gone, the judge-call cache stays
        assert conn.execute("select count(*) from ragsql.dataset where name like 'judge-check-%'").fetchone()[0] == 0
        assert conn.execute("select count(*) from ragsql.judge_call").fetchone()[0] > 0


def test_context_relevance_reaches_090_on_public_english_pairs(offline_db, capsys, tmp_path):
    """The public English pairs for context relevance (SQuAD 2.0 dev: the answer's paragraph against a random one and
    against the same article's paragraph sharing the most words with the question), where words alone stopped at
    0.817: with the local e5 model weighing meaning, ≥ 0.90 (measured 0.929; Chinese, 1.000, is in the bench)."""
    public = Path(__file__).parents[1] / "bench" / "data" / "qa" / "pairs.jsonl"
    english = [
        line
        for line in public.read_text("utf-8").splitlines()
        if json.loads(line)["metric"] == "context_relevance" and json.loads(line)["language"] == "en"
    ]
    (tmp_path / "en.jsonl").write_text("\n".join(english) + "\n", "utf-8")
    code, out, err = run_cli(capsys, "judge-check", str(tmp_path / "en.jsonl"), "--offline", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["pairs"] == 120 and [g["metric"] for g in got["groups"]] == ["context_relevance"]
    assert got["groups"][0]["accuracy"] >= 0.90, got["groups"]


def test_the_hard_public_pairs_are_what_their_script_writes():
    """bench/data/qa/hard_pairs.jsonl is make_pairs.py's output for its seed: 80 questions per language, three answer
    relevancy kinds each, context relevance against a same-article paragraph (SQuAD) and BM25's top other one."""
    qa = Path(__file__).parents[1] / "bench" / "data" / "qa"
    script = runpy.run_path(str(qa / "make_pairs.py"))
    rng = script["random"].Random(script["HARD_SEED"])
    rows = [p for lang in ("en", "zh") for p in script["hard_pairs"](lang, 80, rng)]
    written = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    assert written == (qa / "hard_pairs.jsonl").read_text("utf-8")
    kinds = {(r["language"], r["kind"]) for r in rows}
    assert len(rows) == 720 and ("en", "same-article") in kinds and ("zh", "retrieved") in kinds
    assert all(r["better"] != r["worse"] for r in rows)


def test_answer_relevancy_reaches_085_against_another_questions_templated_answer(offline_db, capsys, tmp_path):
    """The hard public pairs (bench/data/qa/hard_pairs.jsonl): "The answer is X." / "答案是X。" against the same
    template holding the answer of another question of the same article, with both answers' paragraphs as contexts.
    v5 asked both the question itself and tied at 0.506 / 0.519; read where each answer sits in the contexts, ≥ 0.85
    in both languages (measured 0.938 / 0.856), through the pipeline (the task hands the contexts to the offline
    judge)."""
    hard = Path(__file__).parents[1] / "bench" / "data" / "qa" / "hard_pairs.jsonl"
    templated = [line for line in hard.read_text("utf-8").splitlines() if '"same-article-templated"' in line]
    (tmp_path / "templated.jsonl").write_text("\n".join(templated) + "\n", "utf-8")
    code, out, err = run_cli(capsys, "judge-check", str(tmp_path / "templated.jsonl"), "--offline", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["pairs"] == 160 and {g["language"] for g in got["groups"]} == {"en", "zh"}
    assert all(g["metric"] == "answer_relevancy" and g["accuracy"] >= 0.85 for g in got["groups"]), got["groups"]


def test_min_accuracy_fails_with_exit_4_and_names_each_group(offline_db, capsys, tmp_path):
    small = tmp_path / "pairs.jsonl"
    small.write_text(
        "".join(line + "\n" for line in DEV.read_text("utf-8").splitlines() if '"metric": "context_relevance"' in line),
        "utf-8",
    )
    code, out, err = run_cli(capsys, "judge-check", str(small), "--offline", "--by", "kind", "--min-accuracy", "0.99")
    assert code == 4
    failed = [line for line in err.splitlines() if line.startswith("failed: ")]
    assert failed and all("context_relevance" in line and "< 0.99" in line for line in failed)
    assert "hard-negative" in out and "pairwise accuracy of the offline judge" in out


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: {**p, "metric": "faithfulnes"}, "unknown metric 'faithfulnes'"),
        (lambda p: {k: v for k, v in p.items() if k != "question"}, "missing field 'question'"),
        (lambda p: {**p, "better": {"answer": 3}}, "answer of better must be a string"),
        (lambda p: {**p, "worse": dict(p["better"])}, "the better and worse sides are the same"),
        (lambda p: {**p, "contexts": []} if "contexts" in p else {**p, "better": {"contexts": []}}, "needs contexts"),
        (lambda p: {**p, "colour": 1}, "unknown field 'colour'"),
    ],
)
def test_a_bad_pair_is_named_by_file_and_line_and_nothing_is_judged(offline_db, capsys, tmp_path, mutate, message):
    lines = [json.loads(line) for line in DEV.read_text("utf-8").splitlines() if '"metric": "faithfulness"' in line][:3]
    lines[2] = mutate(lines[2])
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in lines), "utf-8")
    code, _, err = run_cli(capsys, "judge-check", str(path), "--offline")
    assert code == 1 and f"{path}:3: " in err and message in err, err
    assert len(err.strip().splitlines()) == 1
    with psycopg.connect(offline_db) as conn:
        assert conn.execute("select count(*) from ragsql.dataset where name like 'judge-check-%'").fetchone()[0] == 0


def test_duplicate_ids_and_empty_files_are_refused(offline_db, capsys, tmp_path):
    line = DEV.read_text("utf-8").splitlines()[0]
    dup = tmp_path / "dup.jsonl"
    dup.write_text(f"{line}\n\n{line}\n", "utf-8")
    code, _, err = run_cli(capsys, "judge-check", str(dup), "--offline")
    assert code == 1 and f"{dup}:3: duplicate pair id" in err and "first on line 1" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", "utf-8")
    code, _, err = run_cli(capsys, "judge-check", str(empty), "--offline")
    assert code == 1 and "no pair in the file" in err


def english_faithfulness() -> str:
    """The lines of the bundled dev pairs that are faithfulness pairs in English."""
    return "".join(
        line + "\n"
        for line in DEV.read_text("utf-8").splitlines()
        if '"metric": "faithfulness"' in line and '"language": "en"' in line
    )


def test_an_llm_judge_is_checked_through_the_client_and_a_second_check_is_free(
    offline_db, capsys, tmp_path, monkeypatch
):
    small = tmp_path / "pairs.jsonl"
    small.write_text(english_faithfulness(), "utf-8")
    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake)
        code, out, err = run_cli(capsys, "judge-check", str(small), "--format", "json", "--embedder", "offline")
        assert code == 0, err
        first = fake.stats()["chat_calls"]
        got = json.loads(out)
        assert got["judge"] == "fake-judge" and not got["offline"] and first > 0
        assert [(g["metric"], g["language"], g["pairs"]) for g in got["groups"]] == [("faithfulness", "en", 62)]
        assert 0 <= got["groups"][0]["accuracy"] <= 1
        code, out2, err = run_cli(capsys, "judge-check", str(small), "--format", "json", "--embedder", "offline")
        assert code == 0 and fake.stats()["chat_calls"] == first  # every reply came from the cache
        assert json.loads(out2)["groups"] == got["groups"]


def test_a_check_gives_the_same_accuracy_in_a_used_database_as_in_a_fresh_one(
    offline_db, capsys, tmp_path, monkeypatch
):
    """The offline check of answer_correctness, then a check by an endpoint with its own embedder on some of them,
    then the offline check again: the same accuracies (the second offline check used to read the endpoint's newer
    embeddings of some of its texts, no value for the others: 0.5 in a used database against 1.0 in a fresh one)."""
    small = tmp_path / "pairs.jsonl"
    small.write_text(
        "".join(
            line + "\n" for line in DEV.read_text("utf-8").splitlines() if '"metric": "answer_correctness"' in line
        ),
        "utf-8",
    )
    code, out, err = run_cli(capsys, "judge-check", str(small), "--format", "json", "--offline")
    assert code == 0, err
    fresh = json.loads(out)["groups"]
    assert all(g["accuracy"] is not None for g in fresh) and len(fresh) >= 2
    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake)
        some = tmp_path / "some.jsonl"  # a few of the pairs: the endpoint embeds some of the texts only
        some.write_text("".join(small.read_text("utf-8").splitlines(keepends=True)[:6]), "utf-8")
        code, _, err = run_cli(capsys, "judge-check", str(some), "--format", "json")
        assert code == 0 and fake.stats()["embedding_calls"] > 0, err
    code, out, err = run_cli(capsys, "judge-check", str(small), "--format", "json", "--offline")
    assert code == 0, err
    assert json.loads(out)["groups"] == fresh


def test_a_metric_with_no_value_has_no_accuracy_and_fails_the_gate(offline_db, capsys, tmp_path, monkeypatch):
    """An endpoint whose every reply is unusable: no pair gets a value, so the accuracy is NULL (not the ties' 0.5)
    with every pair counted under no_value, and --min-accuracy 0 fails (exit 4) saying there is no value."""
    from ragsql.llm import send

    small = tmp_path / "pairs.jsonl"
    small.write_text(english_faithfulness()[:4000].rsplit("\n", 1)[0] + "\n", "utf-8")
    pairs = len(small.read_text("utf-8").splitlines())
    monkeypatch.setattr(send, "DEFAULT_BACKOFF", (0.01, 0.05))
    with FakeOpenAI() as fake:
        fake.fault_mix({"prose": 1.0})
        use_judge(monkeypatch, fake)
        code, out, err = run_cli(capsys, "judge-check", str(small), "--format", "json", "--embedder", "offline")
        assert code == 0, err
        got = json.loads(out)
        assert got["failed_tasks"] == 2 * pairs and pairs >= 2
        assert [(g["metric"], g["pairs"], g["accuracy"], g["no_value"], g["ties"]) for g in got["groups"]] == [
            ("faithfulness", pairs, None, pairs, 0)
        ]
        code, out, err = run_cli(capsys, "judge-check", str(small), "--embedder", "offline", "--min-accuracy", "0")
    assert code == 4 and "accuracy n/a (no pair has a value) < 0.0" in err, err
    assert "NULL" in out and "0.5000" not in out, out


# --- the blind spots issue 13 names, one by one --------------------------------------------------------------


def _faithful(answer: str, contexts: list[str], question: str | None = None) -> list[str]:
    return [h.support(s, contexts)[0] for s in h.statements_of(answer, question)]


def test_a_number_differing_only_in_digits_is_not_supported():
    ctx = ["Revenue reached $10.389 billion in 2021, up 12%. The store opened on May 29, 2021."]
    assert content_tokens("$10.4 billion") == ["10.4", "billion"]
    assert _faithful("Revenue reached $10.389 billion in 2021.", ctx) == ["supported"]
    assert _faithful("Revenue reached $10.4 billion in 2021.", ctx) != ["supported"]
    assert _faithful("The store opened on May 29, 2021.", ctx) == ["supported"]
    assert _faithful("The store opened on May 29 2020.", ctx) == ["contradicted"]


def test_a_swapped_name_in_a_copied_sentence_is_not_supported():
    ctx = ["1851年，法国物理学家傅科在巴黎先贤祠用一个长67米的单摆演示了地球自转。"]
    assert _faithful("1851年，法国物理学家傅科在巴黎先贤祠演示了地球自转。", ctx) == ["supported"]
    assert _faithful("1851年，英国物理学家牛顿在巴黎先贤祠演示了地球自转。", ctx) != ["supported"]
    assert _faithful("1861年，法国物理学家傅科在巴黎先贤祠演示了地球自转。", ctx) == ["contradicted"]


def test_chinese_negation_characters_inside_ordinary_words_are_not_negations():
    for text in ("自转使昼半球和夜半球不断更替", "这是非常重要的", "未来的检索系统", "无论如何都要检查", "是否支持"):
        assert not has_negation(text), text
    for text in ("这不是主要原因", "没有提到", "并非如此", "尚未完成"):
        assert has_negation(text), text
    ctx = ["地球自转导致昼夜交替，自转使昼半球和夜半球不断更替。"]
    assert _faithful("自转使昼半球和夜半球不断更替。", ctx) == ["supported"]
    assert _faithful("自转不会使昼半球和夜半球更替。", ctx) == ["contradicted"]


def test_filler_does_not_count_and_a_bare_answer_is_judged_with_its_question():
    ctx = ["阿尔伯特·爱因斯坦于1905年提出了狭义相对论。"]
    assert _faithful("答案是1905年。", ctx, "爱因斯坦在哪一年提出狭义相对论？") == ["supported"]
    assert _faithful("答案是1915年。", ctx, "爱因斯坦在哪一年提出狭义相对论？") != ["supported"]
    assert h.statements_of("The answer is 1905.", "When did Einstein publish special relativity?") == [
        "When did Einstein publish special relativity: 1905"
    ]


def test_answer_relevancy_reads_the_answer_type_and_restatements():
    q = "How many moons does Mars have?"
    assert k.questions.answers_question("Mars has two small moons, Phobos and Deimos.", q)
    assert not k.questions.answers_question("Mars has moons that people find interesting.", q)  # no number asked for
    assert k.questions.adds_nothing("This is an important question: how many moons does Mars have", q)
    assert k.questions.answers_question("因为地轴倾斜。", "为什么会有四季？")  # a cause for why, no shared word
    assert not k.questions.answers_question("BM25 的参数 k1 常取1.2。", "为什么会有四季？")


def test_a_number_is_found_only_as_a_whole_token():
    ctx = ["For example, with a single relevant document of grade 1 ranked third, nDCG = (1 / log2 4) / 1 = 0.5."]
    assert _faithful("nDCG is 0.5 when the single relevant document of grade 1 is ranked third.", ctx) == ["supported"]
    assert _faithful("nDCG is 5 when the single relevant document of grade 1 is ranked third.", ctx) != ["supported"]


def test_a_restatement_in_a_frame_is_non_committal_but_a_restated_bare_answer_is_not():
    q, q_zh = "How does trec_eval order documents that have the same score?", "长江最终在哪里注入大海？"
    assert k.questions.adds_nothing(
        "How does trec_eval order documents that have the same score is something that comes up a lot in practice.", q
    )
    assert k.questions.adds_nothing(
        "People often wonder: how does trec_eval order documents that have the same score", q
    )
    assert k.questions.adds_nothing("长江最终在哪里注入大海在实际工作中经常被讨论。", q_zh)
    assert not k.questions.adds_nothing("trec_eval sorts documents with the same score by document id, descending.", q)
    assert not k.questions.adds_nothing("长江最终在上海注入东海。", q_zh)
    q = "What does the b parameter of BM25 control?"  # a bare answer, restated with its question by statements_of
    [restated] = h.statements_of("The answer is length normalisation.", q)
    assert k.questions.adds_nothing(restated, q) and not k.questions.adds_nothing(restated, q, framed=False)
    questions = k.questions.offline(k.questions.request("The answer is length normalisation.", question=q, n=3))
    assert not questions["noncommittal"] and questions["questions"] == [q] * 3


def test_an_elliptical_negation_denies_its_own_clause_not_the_context():
    ctx = ["An answer with three statements, of which only the first two are supported, has faithfulness 2/3."]
    assert _faithful("Two of the three statements are supported, the third is not.", ctx) == ["supported"]
    assert _faithful("The first two statements are not supported.", ctx) == ["contradicted"]


def test_context_relevance_counts_question_words_not_question_bigrams():
    q = "BM25 中的参数 k1 和 b 分别起什么作用？通常取多少？"
    assert h.relevant("它由参数 k1 控制，常取1.2。", q)  # 多少 / 分别 / 通常 are not what was asked
    assert not h.relevant("倒数排名融合是一种合并多个结果列表的方法。", q)
    assert h.relevant(
        "Earth completes one turn on its axis in about 23 hours 56 minutes.",
        "How long does Earth take to rotate once on its axis?",
    )  # "does" is a stop word, not "doe"
