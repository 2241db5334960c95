"""Retrieval runs in the database: pick the corpus version, store what each query searches with, and let
ragsql.retrieve_run rank every query in one statement."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import psycopg

from ragsql.db import names
from ragsql.db.connect import vector_cursor
from ragsql.db.load import _copy, analyze, create_run
from ragsql.db.rows import one, value
from ragsql.errors import InputError

__all__ = [
    "Version",
    "RunSpec",
    "dataset_queries",
    "find_version",
    "start_run",
    "add_queries",
    "retrieve",
    "run_report",
    "candidates",
    "replace_results",
]


@dataclass(frozen=True)
class Version:
    """A corpus version: its chunking and embedder."""

    id: int
    corpus: str
    splitter: str
    chunk_size: int
    overlap: int
    embedder: str
    dimensions: int | None

    @property
    def chunking(self) -> str:
        return f"{self.splitter}:{self.chunk_size}:{self.overlap}"


@dataclass(frozen=True)
class RunSpec:
    """How a retrieval run searches: mode, depth, fusion and expansion."""

    mode: str
    k: int
    candidates: int
    weights: dict[str, float]
    rrf_k: int
    expand: int
    rerank: str | None = None
    rerank_depth: int = 50


def find_version(conn: psycopg.Connection, corpus: str, chunking: str | None = None) -> Version:
    """The corpus's version with the given chunking ('splitter:size:overlap'), else its newest version."""
    rows = conn.execute(
        """
        select v.id, c.name, v.splitter, v.chunk_size, v.overlap, v.embedder, v.dimensions
        from ragsql.corpus as c join ragsql.corpus_version as v on v.corpus_id = c.id
        where c.name = %s
        order by v.updated_at desc, v.id desc
        """,
        (corpus,),
    ).fetchall()
    if not rows:
        names.corpus_id(conn, corpus)  # an unknown corpus: the one message for every command
        raise InputError(f'corpus "{corpus}" has no chunks yet: run `ragsql ingest … --corpus {corpus}`')
    versions = [Version(*row) for row in rows]
    if chunking is None:
        return versions[0]
    for v in versions:
        if v.chunking == chunking or f"{v.chunking}:{v.embedder}" == chunking:
            return v
    raise InputError(
        f'corpus "{corpus}" has no chunking {chunking} (it has: {", ".join(sorted({v.chunking for v in versions}))})'
    )


def dataset_queries(conn: psycopg.Connection, dataset: str) -> tuple[int, list[tuple[int, str, str | None]]]:
    """The dataset id and its queries (id, text, language) that have text."""
    dataset_id = names.dataset_id(conn, dataset)
    queries = conn.execute(
        "select id, text, language from ragsql.query where dataset_id = %s and coalesce(btrim(text), '') <> '' "
        "order by id",
        (dataset_id,),
    ).fetchall()
    return dataset_id, queries


def start_run(
    conn: psycopg.Connection, run: str, dataset_id: int, version: Version, spec: RunSpec, config: dict, replace: bool
) -> int:
    """Create the run (replacing one of that name with `replace`) and its retrieval settings."""
    run_id = create_run(conn, run, dataset_id, config, replace=replace)
    depth = max(spec.k, spec.rerank_depth) if spec.rerank else spec.k  # a reranker reorders a deeper list
    conn.execute(
        "insert into ragsql.retrieval_run (run_id, version_id, mode, k, candidates, weights, rrf_k, expand) "
        "values (%s, %s, %s, %s, %s, %s, %s, %s)",
        (run_id, version.id, spec.mode, depth, spec.candidates, json.dumps(spec.weights), spec.rrf_k, spec.expand),
    )
    return run_id


def add_queries(conn: psycopg.Connection, run_id: int, rows: Iterable[tuple]) -> int:
    """Store (query_id, text, terms, embedding or None) of every query the run searches."""
    staged = _copy(
        conn,
        "_stage_retrieval_query",
        ["query_id", "text", "terms", "embedding"],
        ["bigint", "text", "text[]", "vector"],
        ((q, text, terms, None if v is None else np.asarray(v, dtype=np.float32)) for q, text, terms, v in rows),
        cursor=vector_cursor(conn),
    )
    conn.execute(
        "insert into ragsql.retrieval_query (run_id, query_id, text, terms, embedding) "
        "select %s, query_id, text, terms, embedding from _stage_retrieval_query",
        (run_id,),
    )
    return staged


def retrieve(conn: psycopg.Connection, run_id: int) -> int:
    """Rank every query of the run (one statement); returns the result rows written."""
    written = value(conn.execute("select ragsql.retrieve_run(%s)", (run_id,)))
    analyze(conn, ("run_result",))
    return written


def candidates(conn: psycopg.Connection, run_id: int) -> dict[int, tuple[str, list[tuple]]]:
    """{query_id: (query text, [(rank, docno, score, text), ...] in rank order)} of a retrieval run."""
    out: dict[int, tuple[str, list[tuple]]] = {}
    for query_id, query, rank, docno, score, text in conn.execute(
        """
        select r.query_id, q.text, r.rank, r.docno, r.score, r.text
        from ragsql.run_result as r
        join ragsql.retrieval_query as q on q.run_id = r.run_id and q.query_id = r.query_id
        where r.run_id = %s
        order by r.query_id, r.rank
        """,
        (run_id,),
    ):
        out.setdefault(query_id, (query, []))[1].append((rank, docno, score, text))
    return out


def replace_results(conn: psycopg.Connection, run_id: int, k: int, rows: Iterable[tuple]) -> int:
    """Replace the run's results with (query_id, rank, docno, score, text) rows and record its final k."""
    conn.execute("delete from ragsql.run_result where run_id = %s", (run_id,))
    staged = _copy(
        conn,
        "_stage_reranked",
        ["query_id", "rank", "docno", "score", "text"],
        ["bigint", "integer", "text", "float8", "text"],
        rows,
    )
    conn.execute(
        "insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score, text) "
        "select %s, ru.dataset_id, s.query_id, s.rank, s.docno, s.score, s.text "
        "from _stage_reranked as s cross join ragsql.run as ru where ru.id = %s",
        (run_id, run_id),
    )
    conn.execute("update ragsql.retrieval_run set k = %s where run_id = %s", (k, run_id))
    return staged


def run_report(conn: psycopg.Connection, run_id: int) -> dict[str, int]:
    """Queries searched, with no result, and with only document-level (coarse) gold in this chunking."""
    # three statements, each reading one layout's tables: on Citus the run's rows are on one shard and the
    # corpus the gold maps onto stays on the coordinator
    searched, empty = one(
        conn.execute(
            """
        select count(*),
               count(*) filter (where not exists (select 1 from ragsql.run_result as r
                                                  where r.run_id = q.run_id and r.query_id = q.query_id))
        from ragsql.retrieval_query as q
        where q.run_id = %s
        """,
            (run_id,),
        )
    )
    version_id, dataset_id = one(
        conn.execute(
            "select rr.version_id, ru.dataset_id "
            "from ragsql.retrieval_run as rr join ragsql.run as ru on ru.id = rr.run_id "
            "where rr.run_id = %s",
            (run_id,),
        )
    )
    coarse = value(
        conn.execute(
            """
        select count(*) from (
            select vj.query_id from ragsql.version_judgment(%s, %s) as vj
            group by vj.query_id
            having bool_and(vj.coarse)
        ) as g
        """,
            (version_id, dataset_id),
        )
    )
    return {"queries": searched, "empty": empty, "coarse": coarse}
