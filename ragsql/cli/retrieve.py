"""`ragsql retrieve`: a retrieval run over a corpus for a whole eval set, ranked in SQL."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.options import RRF_K, depth_option, spec_option
from ragsql.cli.output import format_option, render, report, warn
from ragsql.cli.specs import finite, int4

__all__ = ["retrieve_command"]

MODES = ("bm25", "vector", "fuzzy", "hybrid")
PATHS = ("bm25", "vector", "fuzzy")


def _weights(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, float]:
    """'bm25=1,vector=0.5' -> {'bm25': 1.0, 'vector': 0.5}; missing paths weigh 1 (0 turns one off)."""
    weights: dict[str, float] = dict.fromkeys(PATHS, 1.0)
    for part in (value or "").replace(" ", ",").split(","):
        if not part:
            continue
        name, sep, number = part.partition("=")
        try:
            weight = finite(number)
        except ValueError:
            weight = -1.0
        if not sep or name.strip() not in PATHS or not weight >= 0:
            raise click.BadParameter(
                f"{part!r} is not PATH=NUMBER with PATH one of {', '.join(PATHS)} and "
                "NUMBER >= 0 (e.g. bm25=1,vector=0.5,fuzzy=0)"
            )
        weights[name.strip()] = weight
    return weights


@click.command("retrieve")
@click.option("--dataset", required=True, help="Eval set whose queries are searched.")
@click.option("--corpus", required=True, help="Corpus to search (see `ragsql ingest`).")
@click.option("--run", "run", required=True, help="Name of the run to write.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="hybrid",
    show_default=True,
    help="bm25: BM25 over stored postings; vector: pgvector HNSW (cosine); fuzzy: pg_trgm word "
    "similarity; hybrid: the three fused by Reciprocal Rank Fusion.",
)
@depth_option(10_000, "Results per query.")
@click.option(
    "--chunking",
    default=None,
    metavar="SPLITTER:SIZE:OVERLAP",
    help="Which corpus version to search when the corpus has several (default: the newest).",
)
@click.option(
    "--candidates",
    default=None,
    type=click.IntRange(1, 10_000),
    help="Hybrid: results each path contributes to the fusion (default: max(50, 2k)).",
)
@click.option(
    "--weights",
    default=None,
    metavar="bm25=1,vector=1,fuzzy=1",
    callback=_weights,
    help="Hybrid: weight of each path in the fusion (0 leaves a path out).",
)
@click.option(
    "--rrf-k",
    default=RRF_K,
    show_default=True,
    type=int4(0),
    help="Hybrid: the k of Reciprocal Rank Fusion, score = sum of weight / (k + rank).",
)
@click.option(
    "--expand",
    default=0,
    show_default=True,
    type=click.IntRange(0, 20),
    help="Add this many neighbouring chunks on each side to a result's text (context expansion).",
)
@spec_option(
    "rerank",
    "Rerank each query's top --rerank-depth results and keep the top k: with a Cohere/Jina-style "
    "/rerank endpoint (RAGSQL_RERANK_BASE_URL / RAGSQL_RERANK_API_KEY, else the judge's endpoint), "
    'or a local cross-encoder given as a hub name or a directory (pip install -e ".[local]" in a ragsql checkout).',
    metavar="endpoint[:MODEL] | cross-encoder:MODEL",
)
@click.option(
    "--rerank-depth",
    default=50,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Results per query the reranker reorders.",
)
@click.option("--replace", is_flag=True, help="Replace a run of the same name.")
@format_option()
def retrieve_command(
    dataset: str,
    corpus: str,
    run: str,
    mode: str,
    k: int,
    chunking: str | None,
    candidates: int | None,
    weights: dict[str, float],
    rrf_k: int,
    expand: int,
    rerank: str | None,
    rerank_depth: int,
    replace: bool,
    fmt: str,
) -> None:
    """Retrieve the top k chunks of a corpus for every query of an eval set, as a run.

    All queries are ranked by one SQL statement. Results are the chunks' ids (c<id>)
    with their text; the dataset's gold evidence (chunk ids, document ids, or document
    spans and quotes) is mapped onto this chunking, so `ragsql metrics --run RUN`
    works at once. The run records its full configuration (ragsql.run.config).
    """
    from ragsql.retrieve import RunSpec, retrieve_run  # imports the embedders: only when retrieving

    spec = RunSpec(
        mode=mode,
        k=k,
        candidates=candidates or max(50, 2 * k),
        weights=weights,
        rrf_k=rrf_k,
        expand=expand,
        rerank=rerank,
        rerank_depth=rerank_depth,
    )
    with db.connect() as conn:
        db.ensure_schema(conn)
        s = retrieve_run(
            conn,
            dataset=dataset,
            corpus=corpus,
            run=run,
            spec=spec,
            chunking=chunking,
            replace=replace,
            on_note=lambda line: click.echo(line, err=True),
        )
    warnings = []
    if s.queries and not s.results:
        warnings.append(f"no query retrieved anything from corpus {s.version.corpus} ({mode})")
    if s.coarse:
        warnings.append(
            f"{s.coarse} queries have only document-level gold in this chunking: every chunk of their "
            "documents counts as relevant, which overestimates retrieval (give spans or quotes)"
        )
    if s.unmatched:
        warnings.append(s.unmatched.line())
    if fmt == "json":
        report(
            {
                "run": s.run,
                "dataset": dataset,
                "corpus": s.version.corpus,
                "mode": mode,
                "k": k,
                "queries": s.queries,
                "results": s.results,
                "empty": s.empty,
                "coarse_gold": s.coarse,
                "rerank_calls": s.rerank_calls,
                "rerank_cached": s.rerank_cached,
                "seconds": round(s.seconds, 3),
                "config": s.config,
                "unmatched_gold": s.unmatched.as_json(),
            },
            warnings,
        )
        return
    rows = [
        {"item": "queries searched", "value": s.queries},
        {"item": "results written", "value": s.results},
        {"item": "queries with no result", "value": s.empty},
        *(
            [
                {"item": "rerank calls", "value": s.rerank_calls},
                {"item": "reranked from cache", "value": s.rerank_cached},
            ]
            if rerank
            else []
        ),
        {"item": "seconds", "value": f"{s.seconds:.2f}"},
    ]
    render(
        rows,
        ["item", "value"],
        "table",
        title=f"run {s.run}: {mode} over {s.version.corpus} ({s.version.chunking}, {s.version.embedder}), k={k}",
    )
    for line in warnings:
        warn(line)
