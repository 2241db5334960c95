"""Citation parsing of answers (citation coverage and validity are computed in SQL from these rows)."""

from __future__ import annotations

import json

import psycopg

from ragsql.cli import main
from ragsql.judge.verdicts import citation_id
from ragsql.orchestrator.tasks.citations import cited_sentences, has_citations


def test_sentences_keep_their_citations_in_order():
    answer = "RAG retrieves first [c1]. It then generates [c2, c3]. No source here. 向量数据库存储向量[2]。"
    assert cited_sentences(answer, {"c1", "c2", "c3", "2"}) == [
        ("RAG retrieves first [c1].", ["c1"]),
        ("It then generates [c2, c3].", ["c2", "c3"]),
        ("No source here.", []),
        ("向量数据库存储向量[2]。", ["2"]),
    ]


def test_a_citation_after_the_full_stop_belongs_to_the_sentence_before():
    assert cited_sentences("Paris is the capital. [doc-7]", {"doc-7"}) == [("Paris is the capital.", ["doc-7"])]


def test_has_citations():
    assert has_citations("see [c12]", {"c12"}) and not has_citations("a list [ ] or (c12) is no citation", {"c12"})


def test_wikipedia_footnotes_are_no_citations():
    """Footnotes [1][2] copied into an answer whose contexts are cited by docno cite nothing (they used to count
    as citations of contexts 1 and 2); a context with no bracketable docno is cited by its position."""
    answer = "Paris is the capital of France[1][2]. It lies on the Seine [c7]. [3]"
    assert cited_sentences(answer, {"c7", "c8"}) == [
        ("Paris is the capital of France[1][2].", []),
        ("It lies on the Seine [c7].", ["c7"]),
    ]
    assert not has_citations("Paris is the capital of France.[1][2]", {"ctx:ab12", "ctx:cd34"})
    assert citation_id("doc 7", 2) == "2" and citation_id(None, 3) == "3" and citation_id("c7", 1) == "c7"
    assert cited_sentences("Paris is the capital [2].", {citation_id("doc 7", 2)}) == [
        ("Paris is the capital [2].", ["2"])
    ]


def test_the_citations_metric_counts_only_the_contexts_citation_ids(fresh_db, tmp_path, capsys, monkeypatch):
    """Judged offline: an answer with Wikipedia footnotes [1][2] and one citation [d1] has one citation, not
    three; an answer with only footnotes cites nothing (validity null with its reason); and a run whose answers
    carry only footnotes skips the citations metric by default."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGSQL_JUDGE_BASE_URL", "RAGSQL_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    contexts = ["Paris is the capital and largest city of France.", "The Seine flows through Paris."]
    rows = [
        {
            "qid": "q1",
            "query": "What is the capital of France?",
            "retrieved_ids": ["d1", "d2"],
            "retrieved_contexts": contexts,
            "answer": "Paris is the capital of France [d1]. It is large[1][2].",
        },
        {
            "qid": "q2",
            "query": "Which river flows through Paris?",
            "retrieved_ids": ["d1", "d2"],
            "retrieved_contexts": contexts,
            "answer": "The Seine flows through Paris[1][2].",
        },
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["import", "jsonl", str(path), "--dataset", "c", "--run", "cite"]) == 0
    assert main(["judge", "--run", "cite", "--offline", "--metrics", "citations"]) == 0
    with psycopg.connect(fresh_db) as conn:
        verdicts = conn.execute(
            "select q.qid, count(*) filter (where v.citation_no > 0), "
            "array_agg(v.docno) filter (where v.citation_no > 0) "
            "from ragsql.citation_verdict v join ragsql.query q on q.id = v.query_id "
            "group by q.qid order by 1"
        ).fetchall()
        validity = dict(conn.execute("select qid, reason from ragsql.citation_validity('cite')").fetchall())
        coverage = dict(conn.execute("select qid, value from ragsql.citation_coverage('cite')").fetchall())
    assert verdicts == [("q1", 1, ["d1"]), ("q2", 0, None)]
    assert validity["q2"] == "the answer cites nothing" and coverage == {"q1": 0.5, "q2": 0.0}

    footnotes_only = tmp_path / "run2.jsonl"
    footnotes_only.write_text(json.dumps(rows[1]) + "\n", encoding="utf-8")
    assert main(["import", "jsonl", str(footnotes_only), "--dataset", "c2", "--run", "notes"]) == 0
    capsys.readouterr()
    main(["judge", "--run", "notes", "--offline"])
    assert "no answer cites its contexts" in capsys.readouterr().err
