"""Typed rows and values out of the database, and pgvector's vectors into it (ragsql.db.rows, ragsql.db.connect)."""

from __future__ import annotations

import asyncio

import numpy as np
import psycopg
import pytest

from ragsql.db import judging
from ragsql.db.connect import vector_cursor
from ragsql.db.load import _copy
from ragsql.db.rows import one, value
from ragsql.errors import DatabaseError
from ragsql.formats import parse_records


def test_value_and_one_are_the_row_a_statement_returns_and_a_database_error_when_none_came(db):
    """value/one give the one row or value of a statement; no row is a one-line DatabaseError, not a TypeError."""
    assert value(db.execute("select 40 + %s", (2,))) == 42
    assert one(db.execute("select 1, 'a'")) == (1, "a")
    with pytest.raises(DatabaseError, match="no row where one is always expected"):
        value(db.execute("select 1 where false"))


def _float4(values: list[float]) -> list[float]:
    """float4 values read back as text (psycopg loads real through its shortest decimal), made float4 again."""
    return np.asarray(values, dtype=np.float32).tolist()


# 1 + 2**-24 lies exactly halfway between the float4 values 1 and 1 + 2**-23: a tie, rounded to even (1.0)
_TIE = 1 + 2**-24


def test_every_path_stores_the_same_float4_vector_and_leaves_the_connection_loading_text(db, shared_db_url):
    """A chunk or query embedding (COPY through vector_cursor) and a judge's text embedding (store_embeddings) of
    the same floats are the same float4 values, a tie rounded to even; the connection still loads vector as text."""
    vec = [_TIE, 1 / 3, -0.1, 2.5e-8]
    expected = _float4(vec)
    _copy(db, "_stage_vec", ["v"], ["vector"], [(np.asarray(vec),)], cursor=vector_cursor(db))
    assert isinstance(value(db.execute("select v from _stage_vec")), str)  # the connection's adapters are untouched
    assert _float4(value(db.execute("select v::real[] from _stage_vec"))) == expected

    async def store() -> list[float]:
        async with await psycopg.AsyncConnection.connect(shared_db_url) as conn:
            await judging.store_embeddings(conn, "test:rows", [("0" * 64, vec, None)])
            cur = await conn.execute("select embedding::real[] from ragsql.text_embedding where embedder = 'test:rows'")
            stored = (await cur.fetchall())[0][0]
            await conn.rollback()
            return stored

    assert _float4(asyncio.run(store())) == expected
    assert expected[0] == 1.0  # the tie went to even, as numpy (and pgvector's array cast) round


def test_record_rows_are_named_tuples_that_still_compare_as_tuples():
    """A record's judgments, spans and retrieved items read by name and still equal the plain tuples."""
    (record,) = parse_records(
        [
            '{"qid": "q1", "question": "Who?", "retrieved_ids": ["d1"], "retrieved_scores": [0.5],'
            ' "gold_evidence": [{"doc_id": "d1", "text": "Zhang Wei", "relevance": 2}, "d2"]}'
        ],
        "jsonl",
    )
    (span,) = record.spans
    assert (span.doc_id, span.start, span.end, span.quote, span.relevance) == ("d1", None, None, "Zhang Wei", 2)
    assert record.judgments[0].docno == "d2" and record.judgments == (("d2", 1, None),)
    assert record.retrieved[0].score == 0.5 and record.retrieved == (("d1", 0.5, None),)
