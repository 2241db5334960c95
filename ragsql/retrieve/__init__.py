"""Retrieval runs: represent every query of an eval set as the corpus version expects (BM25 terms tokenised as
the documents were, an embedding by the version's embedder), store them, and rank them all in SQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import psycopg

from ragsql import db as database
from ragsql.calls import CallService
from ragsql.corpus import SEGMENTERS
from ragsql.db import corpus as corpus_db, gold as gold_db, load, retrieval as db
from ragsql.db.retrieval import RunSpec, Version
from ragsql.embed import embed_queries, make_embedder, prepare
from ragsql.errors import InputError
from ragsql.judge.language import detect_language
from ragsql.llm.aio import settle_together
from ragsql.llm.calls import CallFailed
from ragsql.llm.settings import EndpointSettings
from ragsql.rerank import RerankFailed, Reranker, make_reranker

__all__ = ["MODES", "RetrievalSummary", "RunSpec", "retrieve_run"]

MODES = ("bm25", "vector", "fuzzy", "hybrid")
PATHS = ("bm25", "vector", "fuzzy")


@dataclass
class RetrievalSummary:
    """What a retrieval run did; `unmatched` is the dataset's gold evidence that maps onto no chunk of the version."""

    run: str
    version: Version
    spec: RunSpec
    queries: int = 0
    results: int = 0
    empty: int = 0
    coarse: int = 0
    rerank_calls: int = 0
    rerank_cached: int = 0
    seconds: float = 0.0
    config: dict = field(default_factory=dict)
    unmatched: gold_db.UnmatchedGold = field(default_factory=gold_db.UnmatchedGold)


def retrieve_run(
    conn: psycopg.Connection,
    *,
    dataset: str,
    corpus: str,
    run: str,
    spec: RunSpec,
    chunking: str | None = None,
    replace: bool = False,
    settings: EndpointSettings | None = None,
    on_note: Callable[[str], None] | None = None,
) -> RetrievalSummary:
    """Retrieve the top `spec.k` chunks of `corpus` for every query of `dataset` as run `run` (one transaction);
    `on_note` is told of a local model's one-time preparation before it starts."""
    started = time.perf_counter()
    _check(spec)
    version = db.find_version(conn, corpus, chunking)
    dataset_id, queries = db.dataset_queries(conn, dataset)
    if not queries:
        raise InputError(f'dataset "{dataset}" has no query with text to search for')
    needs_vectors = spec.mode == "vector" or (spec.mode == "hybrid" and spec.weights.get("vector", 0) > 0)
    if needs_vectors and not version.dimensions:
        raise InputError(f'corpus "{corpus}" ({version.chunking}) has no embeddings: vector search is impossible')
    reranker = make_reranker(spec.rerank, settings) if spec.rerank else None  # a bad model fails before any work
    languages = [(lang or detect_language(text)).lower()[:2] for _, text, lang in queries]
    terms = corpus_db.query_terms(conn, [(text, lang) for (_, text, _), lang in zip(queries, languages)], SEGMENTERS)
    vectors, embedder_source = (
        _embed(version, [text for _, text, _ in queries], settings, on_note)
        if needs_vectors
        else ([None] * len(queries), None)
    )
    config = {
        "source": "ragsql retrieve",
        "corpus": corpus,
        "corpus_version": version.id,
        "chunking": version.chunking,
        "embedder": version.embedder,
        **({"embedder_source": embedder_source} if embedder_source else {}),
        **asdict(spec),
        **({"reranker": reranker.config} if reranker is not None else {}),
    }
    summary = RetrievalSummary(run=run, version=version, spec=spec, config=config)
    with conn.transaction():
        run_id = db.start_run(conn, run, dataset_id, version, spec, config, replace)
        summary.queries = db.add_queries(
            conn, run_id, ((qid, text, sorted(t), v) for (qid, text, _), t, v in zip(queries, terms, vectors))
        )
        summary.results = db.retrieve(conn, run_id)
        if reranker is not None:
            summary.results = _rerank(conn, run_id, spec.k, reranker, summary)
        load.settle_run(conn, run_id)  # a replaced run goes last: dropping its partition locks run_result
        report = db.run_report(conn, run_id)
        summary.unmatched = gold_db.run_unmatched(conn, run)
    summary.empty, summary.coarse = report["empty"], report["coarse"]
    summary.seconds = time.perf_counter() - started
    return summary


def _rerank(conn: psycopg.Connection, run_id: int, k: int, reranker: Reranker, summary: RetrievalSummary) -> int:
    """Reorder each query's candidates by the reranker's scores (ties: retrieval rank), keep the top k.

    An endpoint's replies go through the call service like the judge's (cached in ragsql.judge_call, stored on
    its own connections, so they survive a failure; a local model's are not); a failure raises and the run's
    transaction stores nothing."""
    pending = db.candidates(conn, run_id)

    async def go() -> list[tuple]:
        try:
            async with CallService(database.database_url(), purpose="rerank", run_id=run_id) as service:
                results = await settle_together(
                    _rerank_one(service, reranker, qid, query, items, k, summary)
                    for qid, (query, items) in pending.items()
                )
        finally:
            await reranker.aclose()
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        return [row for query_rows in results if not isinstance(query_rows, BaseException) for row in query_rows]

    return db.replace_results(conn, run_id, k, asyncio.run(go()))


async def _rerank_one(
    service: CallService,
    reranker: Reranker,
    query_id: int,
    query: str,
    items: list[tuple],
    k: int,
    summary: RetrievalSummary,
) -> list[tuple]:
    texts = [text or "" for _, _, _, text in items]
    key = reranker.request_hash(query, texts)
    if key is None:  # a local model: nothing to cache
        scores, _ = await reranker.rerank(query, texts)
        summary.rerank_calls += 1
    else:
        try:
            # an endpoint reranker (it has a request hash) returns its call's record, never None
            stored = await service.get(key, lambda: _reranked(reranker, query, texts))  # pyright: ignore[reportArgumentType]
        except CallFailed as exc:
            raise RerankFailed(f"the rerank endpoint failed ({reranker.name}): {exc}") from None
        summary.rerank_cached += stored.cached
        summary.rerank_calls += not stored.cached
        scores = stored.response["scores"]
    order = sorted(range(len(items)), key=lambda i: (-scores[i], items[i][0]))[:k]
    return [(query_id, rank, items[i][1], scores[i], items[i][3]) for rank, i in enumerate(order, 1)]


async def _reranked(reranker: Reranker, query: str, texts: list[str]):
    """(scores, record) of one endpoint call; a failed call comes back as its failed record."""
    try:
        return await reranker.rerank(query, texts)
    except CallFailed as exc:
        if exc.record is None:
            raise
        return None, exc.record


def _check(spec: RunSpec) -> None:
    if spec.mode not in MODES:
        raise InputError(f"unknown mode {spec.mode!r}: use one of {', '.join(MODES)}")
    if spec.k < 1 or spec.candidates < 1:
        raise InputError("k and candidates must be at least 1")
    unknown = set(spec.weights) - set(PATHS)
    if unknown or any(w < 0 for w in spec.weights.values()):
        raise InputError(f"weights name the paths {', '.join(PATHS)} with numbers >= 0, got {spec.weights}")
    if spec.mode == "hybrid" and not any(w > 0 for w in spec.weights.values()):
        raise InputError("hybrid retrieval needs at least one path with a positive weight")


def _embed(
    version: Version, texts: list[str], settings: EndpointSettings | None, on_note: Callable[[str], None] | None
) -> tuple[list, str | None]:
    """Embeddings of the query texts by the embedder the corpus version was built with, and where that embedder
    comes from when it says (a package and its version)."""
    embedder = make_embedder(version.embedder, settings or EndpointSettings.from_env())

    async def go():
        try:
            await prepare(embedder, on_note)  # e5-onnx's graph build on a machine without it: named, not silent
            vectors, _ = await embed_queries(embedder, texts)
            return vectors
        finally:
            await embedder.aclose()

    return list(asyncio.run(go())), getattr(embedder, "source", None)
