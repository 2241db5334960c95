"""Citation parsing of answers (citation coverage and validity are computed in SQL from these rows)."""

from __future__ import annotations

from ragsql.orchestrator.tasks import cited_sentences, has_citations


def test_sentences_keep_their_citations_in_order():
    answer = "RAG retrieves first [c1]. It then generates [c2, c3]. No source here. 向量数据库存储向量[2]。"
    assert cited_sentences(answer) == [
        ("RAG retrieves first [c1].", ["c1"]),
        ("It then generates [c2, c3].", ["c2", "c3"]),
        ("No source here.", []),
        ("向量数据库存储向量[2]。", ["2"]),
    ]


def test_a_citation_after_the_full_stop_belongs_to_the_sentence_before():
    assert cited_sentences("Paris is the capital. [doc-7]") == [("Paris is the capital.", ["doc-7"])]


def test_has_citations():
    assert has_citations("see [c12]") and not has_citations("a list [ ] or (c12) is no citation")
