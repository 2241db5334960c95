"""`ragsql import`: load eval sets and runs from TREC qrels/run files, JSONL or CSV."""

from __future__ import annotations

import os

import click

from ragsql import db
from ragsql.cli.output import format_option, report, warn
from ragsql.errors import NothingDone, UsageError
from ragsql.importer import ImportSummary, import_records, import_trec

__all__ = ["import_group"]

_FILE = click.Path(exists=True, dir_okay=False)
_CORPUS = (
    "Check the gold evidence against this corpus and warn about what matches nothing (default: gold spans "
    "and chunk ids against every corpus)."
)


@click.group("import")
def import_group() -> None:
    """Load an eval set (queries, gold evidence, reference answers) and a RAG system's outputs.

    Each import is one transaction: a malformed line stores nothing and names
    file and line. Labels of a query already in the dataset are kept when the file
    gives the same ones again; --replace replaces them and a run of the same name.
    A file with no record stores nothing and exits 1.
    """


@import_group.command("trec")
@click.option("--dataset", required=True, help="Dataset to load into (created when new).")
@click.option("--qrels", "qrels", required=True, type=_FILE, help="TREC qrels: 'qid iter docno relevance' lines.")
@click.option("--file", "run_file", type=_FILE, help="TREC run file: 'qid Q0 docno rank score tag' lines.")
@click.option("--run", help="Name of the run of --file (default: the tag column of its first line).")
@click.option("--run-name", hidden=True, help="Old spelling of --run NAME (deprecated).")
@click.option("--replace", is_flag=True, help="Replace a run of the same name and the judgments of these queries.")
@click.option("--corpus", help=_CORPUS)
@format_option()
def trec_command(
    dataset: str,
    qrels: str,
    run_file: str | None,
    run: str | None,
    run_name: str | None,
    replace: bool,
    corpus: str | None,
    fmt: str,
) -> None:
    """Import TREC qrels and optionally a run (--file, named --run).

    The run's rank column is ignored: results are ranked as trec_eval ranks them,
    by score descending, ties by docno descending in byte order. Run topics that
    are not in the qrels become unjudged queries of the dataset.
    """
    run_file, run = _old_trec_run(run_file, run, run_name)
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction():
            summary = _stored(qrels, import_trec(conn, dataset, qrels, run_file, run, replace=replace, corpus=corpus))
    _report(qrels if run_file is None else run_file, summary, fmt)


def _old_trec_run(run_file: str | None, run: str | None, run_name: str | None) -> tuple[str | None, str | None]:
    """(run file, run name) of `import trec`, from the old spelling too (`--run FILE [--run-name NAME]`), which
    keeps working with a note."""
    if run_name is not None:
        click.echo("ragsql: note: import trec --run-name is deprecated: use --run NAME", err=True)
    if run_file is not None:
        if run is not None and run_name is not None:
            raise UsageError("give the run's name once: --run NAME (--run-name is its old spelling)")
        return run_file, run if run is not None else run_name
    if run is None:
        if run_name is not None:
            raise UsageError("--run names the run of a run file: give the file with --file FILE")
        return None, None
    if not os.path.isfile(run):
        raise UsageError(f"--run {run} names the run of --file FILE, and no --file was given")
    click.echo("ragsql: note: import trec --run FILE is deprecated: use --file FILE [--run NAME]", err=True)
    return run, run_name


def _records_command(kind: str, example: str):
    @click.argument("file", type=_FILE)
    @click.option("--dataset", required=True, help="Dataset to load into (created when new).")
    @click.option("--run", help="Store the records' retrieved items and answers as this run.")
    @click.option("--skip-bad", is_flag=True, help="Skip malformed records, load the rest and list every skipped line.")
    @click.option(
        "--replace", is_flag=True, help="Replace a run of the same name and the labels of the queries this file labels."
    )
    @click.option("--corpus", help=_CORPUS)
    @format_option()
    def command(
        file: str, dataset: str, run: str | None, skip_bad: bool, replace: bool, corpus: str | None, fmt: str
    ) -> None:
        with db.connect() as conn:
            db.ensure_schema(conn)
            with conn.transaction():
                summary = _stored(
                    file,
                    import_records(conn, file, kind, dataset, run, skip_bad=skip_bad, replace=replace, corpus=corpus),
                )
        _report(file, summary, fmt)

    command.__doc__ = f"""Import eval-set records from {kind.upper()} ({example}).

    Field names of RAGAS (user_input, retrieved_contexts, reference_contexts,
    response, reference), older RAGAS (question, contexts, answer, ground_truth,
    ground_truths) and the retrieval seed (qid, query, gold_evidence, rel_map,
    gold_answer, retrieved) are accepted, plus retrieved_ids and retrieved_scores
    parallel to the contexts, or retrieved items as {{"id", "score", "text"}} objects.
    Contexts given without an id get 'ctx:' + 16 hex of the sha256 of their text,
    so a retrieved context equal to a reference context counts as relevant.
    Unknown fields go into the query's metadata. Retrieved items and answers
    need --run.
    """
    return command


import_group.command("jsonl")(_records_command("jsonl", "one JSON object per line"))
import_group.command("csv")(
    _records_command(
        "csv", 'a header row; list cells are JSON arrays such as ["ctx a","ctx b"], a plain cell is one element'
    )
)


def _stored(file: str, s: ImportSummary) -> ImportSummary:
    """The summary of an import that stored something; NothingDone (rolled back) for one that read no record."""
    if not (s.queries or s.judgments or s.results or s.answers):
        for line, message in s.skipped:
            click.echo(f"{file}:{line}: {message}", err=True)
        bad = f": all {len(s.skipped)} records were bad" if s.skipped else ""
        raise NothingDone(f"{file}: no record to import{bad}; nothing was stored")
    return s


def _report(file: str, s: ImportSummary, fmt: str) -> None:
    """The summary on stdout (a line, or one JSON object); each skipped record as FILE:LINE: message on stderr."""
    for line, message in s.skipped:
        click.echo(f"{file}:{line}: {message}", err=True)
    warnings = [s.unmatched.line()] if s.unmatched else []
    if fmt == "json":
        report(
            {
                "file": file,
                "dataset": s.dataset,
                "run": s.run,
                "queries": s.queries,
                "judgments": s.judgments,
                "spans": s.spans,
                "references": s.references,
                "results": s.results,
                "answers": s.answers,
                "skipped": [{"line": line, "message": message} for line, message in s.skipped],
                "unmatched_gold": s.unmatched.as_json(),
            },
            warnings,
        )
        return
    for line in warnings:
        warn(line)
    parts = [f"{s.queries} queries", f"{s.judgments} judgments", f"{s.references} reference answers"]
    if s.spans:
        parts.insert(2, f"{s.spans} gold spans")
    if s.run is not None:
        parts.append(f"run {s.run}: {s.results} results, {s.answers} answers")
    if s.skipped:
        parts.append(f"{len(s.skipped)} bad records skipped")
    click.echo(f"imported into dataset {s.dataset}: " + ", ".join(parts))
