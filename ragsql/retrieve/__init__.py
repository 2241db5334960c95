"""Retrieval runs: represent every query of an eval set as the corpus version expects (BM25 terms tokenised as
the documents were, an embedding by the version's embedder), store them, and rank them all in SQL."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field

import psycopg

from ragsql.corpus import SEGMENTERS
from ragsql.db import corpus as corpus_db
from ragsql.db import retrieval as db
from ragsql.db.retrieval import RunSpec, Version
from ragsql.embed import make_embedder
from ragsql.errors import InputError
from ragsql.judge.language import detect_language
from ragsql.llm.settings import EndpointSettings

__all__ = ["MODES", "RetrievalSummary", "RunSpec", "retrieve_run"]

MODES = ("bm25", "vector", "fuzzy", "hybrid")
PATHS = ("bm25", "vector", "fuzzy")


@dataclass
class RetrievalSummary:
    """What a retrieval run did."""

    run: str
    version: Version
    spec: RunSpec
    queries: int = 0
    results: int = 0
    empty: int = 0
    coarse: int = 0
    seconds: float = 0.0
    config: dict = field(default_factory=dict)


def retrieve_run(conn: psycopg.Connection, *, dataset: str, corpus: str, run: str, spec: RunSpec,
                 chunking: str | None = None, replace: bool = False,
                 settings: EndpointSettings | None = None) -> RetrievalSummary:
    """Retrieve the top `spec.k` chunks of `corpus` for every query of `dataset` as run `run` (one transaction)."""
    started = time.perf_counter()
    _check(spec)
    version = db.find_version(conn, corpus, chunking)
    dataset_id, queries = db.dataset_queries(conn, dataset)
    if not queries:
        raise InputError(f'dataset "{dataset}" has no query with text to search for')
    needs_vectors = spec.mode == "vector" or (spec.mode == "hybrid" and spec.weights.get("vector", 0) > 0)
    if needs_vectors and not version.dimensions:
        raise InputError(f'corpus "{corpus}" ({version.chunking}) has no embeddings: vector search is impossible')
    languages = [(lang or detect_language(text)).lower()[:2] for _, text, lang in queries]
    terms = corpus_db.query_terms(conn, [(text, lang) for (_, text, _), lang in zip(queries, languages)], SEGMENTERS)
    vectors = _embed(version, [text for _, text, _ in queries], settings) if needs_vectors else [None] * len(queries)
    config = {"source": "ragsql retrieve", "corpus": corpus, "corpus_version": version.id,
              "chunking": version.chunking, "embedder": version.embedder, **asdict(spec), "rerank": None}
    summary = RetrievalSummary(run=run, version=version, spec=spec, config=config)
    with conn.transaction():
        run_id = db.start_run(conn, run, dataset_id, version, spec, config, replace)
        summary.queries = db.add_queries(conn, run_id, (
            (qid, text, sorted(t), v) for (qid, text, _), t, v in zip(queries, terms, vectors)))
        summary.results = db.retrieve(conn, run_id)
        report = db.run_report(conn, run_id)
    summary.empty, summary.coarse = report["empty"], report["coarse"]
    summary.seconds = time.perf_counter() - started
    return summary


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


def _embed(version: Version, texts: list[str], settings: EndpointSettings | None) -> list:
    """Embeddings of the query texts by the embedder the corpus version was built with."""
    embedder = make_embedder(version.embedder, settings or EndpointSettings.from_env())

    async def go():
        try:
            vectors, _ = await embedder.embed(texts)
            return vectors
        finally:
            await embedder.aclose()

    return list(asyncio.run(go()))
