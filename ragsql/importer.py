"""Imports of eval sets and runs (TREC qrels/runs, JSONL/CSV records), each in one transaction.

Files are streamed into COPY, reading them once per table they feed, so no import holds its rows in
memory. A TREC run is read once, in blocks: each query's results are ranked in Python as soon as the file
moves on to the next query and copied straight into ragsql.run_result while the next block is parsed, so
memory holds two blocks and the largest query (formats.trec.rank_run). Labels (judgments, reference
answers) of a query already in the dataset are kept when the file gives the same ones again, replaced with
replace=True, and otherwise the import is refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar, cast

import psycopg
from psycopg.pq import TransactionStatus

from ragsql.db import gold, load, results
from ragsql.errors import InputError
from ragsql.formats import RankedBlock, Record, parse_qrels, parse_records, parse_run, rank_run
from ragsql.formats.files import text_lines
from ragsql.formats.records import answer_contexts, ranked

__all__ = ["ImportSummary", "import_trec", "import_records"]

T = TypeVar("T")


@dataclass
class ImportSummary:
    """What one import stored: row counts, the (line, message) of each record skipped with skip_bad, and the
    dataset's gold evidence that matches nothing in the corpus given (or in any corpus: ragsql.db.gold)."""

    dataset: str
    run: str | None = None
    queries: int = 0
    judgments: int = 0
    spans: int = 0
    references: int = 0
    results: int = 0
    answers: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    unmatched: gold.UnmatchedGold = field(default_factory=gold.UnmatchedGold)


def import_trec(
    conn: psycopg.Connection,
    dataset: str,
    qrels_path: str | os.PathLike,
    run_path: str | os.PathLike | None = None,
    run_name: str | None = None,
    replace: bool = False,
    corpus: str | None = None,
) -> ImportSummary:
    """Load TREC qrels (and a run, ranked as trec_eval ranks it) into a dataset; run topics not in the qrels
    become unjudged queries. The run is named run_name, else after the tag column of its first line."""
    qrels_path, run_path = str(qrels_path), (str(run_path) if run_path is not None else None)
    _require_name("dataset", dataset)
    if run_path is not None and run_name is not None:
        _require_name("run", run_name)
    judged = list(dict.fromkeys(qid for qid, _, _ in parse_qrels(text_lines(qrels_path), qrels_path)))
    if not judged:
        raise InputError(
            "the qrels file holds no judgments (it is empty, or only comments and blank lines)", qrels_path
        )
    summary = ImportSummary(dataset)
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    gold.require_corpus(conn, corpus)
    with conn.transaction():
        dataset_id = load.ensure_dataset(conn, dataset)
        summary.queries = load.add_queries(conn, dataset_id, ((qid, None, None, None) for qid in judged))
        summary.judgments = _add_labels(
            conn,
            _JUDGMENTS,
            dataset_id,
            dataset,
            judged,
            qrels_path,
            replace,
            lambda: ((qid, docno, rel, None) for qid, docno, rel in parse_qrels(text_lines(qrels_path), qrels_path)),
        )
        summary.unmatched = gold.dataset_unmatched(conn, dataset, corpus)
        if run_path is not None:
            # last: attaching the run's partition locks the default partition of run_result until commit
            config = {"source": "trec", "file": os.path.abspath(run_path), "qrels": os.path.abspath(qrels_path)}
            _add_trec_run(conn, summary, dataset_id, judged, run_path, run_name, config, replace)
    # a run's own partition of run_result was analyzed when attached (analyzing run_result would read them all)
    _analyze(conn, idle, ("query", "judgment") if results.partitioned(conn) else ("query", "judgment", "run_result"))
    return summary


def _add_trec_run(
    conn: psycopg.Connection,
    summary: ImportSummary,
    dataset_id: int,
    judged: list[str],
    path: str,
    name: str | None,
    config: dict,
    replace: bool,
) -> None:
    """Stream a TREC run into a new run, block by block: its new topics become queries, the queries each block
    completes are ranked in Python and copied straight into the results; a query the file comes back to is ranked
    whole by the database at the end. The run is named `name`, else after the tag of its first line.

    On one server the results go into a table of the run's own with no index, indexed and attached as the run's
    partition of run_result at the end (ragsql.db.results.attach_partition)."""
    ids = results.query_ids(conn, dataset_id, judged)
    run_id = None
    table = results.RUN_RESULT
    unranked = 0
    for block, rankings in _read_ahead(_ranked_texts(path)):
        if run_id is None:
            name = name or block.tag
            _require_name("run", name)
            run_id = load.create_run(conn, name, dataset_id, config, replace=replace)
            if results.partitioned(conn):
                table = results.bare_partition(conn, run_id)
        if new := [qid for qid in block.qids if qid not in ids]:
            summary.queries += load.add_queries(conn, dataset_id, ((qid, None, None, None) for qid in new))
            ids.update(results.query_ids(conn, dataset_id, new))
        results.copy_ranked(conn, run_id, dataset_id, ((ids[qid], text) for qid, text in rankings), table)
        summary.results += block.rows
        qids, docnos, scores = block.loose
        unranked += results.stage_unranked(conn, zip(map(ids.__getitem__, qids), docnos, scores)) if qids else 0
    if run_id is None:
        raise InputError("the run file holds no results (it is empty, or only comments and blank lines)", path)
    try:
        if unranked:
            results.rank_staged(conn, run_id, dataset_id, table)
        if table is not results.RUN_RESULT:
            results.index_partition(conn, run_id)
    except InputError:
        # a docno given twice for a query the file came back to: read the file whole to say where
        for _ in parse_run(text_lines(path), path):
            pass
        raise
    # the old run's partition is dropped, and run_result locked, only now: before the attach, which then finds
    # the default partition free (whoever reads it holds run_result too)
    load.settle_run(conn, run_id)
    if table is not results.RUN_RESULT:
        results.attach_partition(conn, run_id)
    summary.run = name


def _ranked_texts(path: str) -> Iterator[tuple[RankedBlock, list[tuple[str, str]]]]:
    """Each block of a run with the COPY text of every query it completes: all the Python work of a block."""
    for block in rank_run(path):
        yield block, [(qid, results.ranking_text(docnos, scores)) for qid, docnos, scores in block.queries]


def _read_ahead(items: Iterator[T]) -> Iterator[T]:
    """The items of `items`, each made in a thread of its own while the caller works on the one before: the next
    block of a run is parsed while the database stores the last (psycopg lets go of the GIL while it waits)."""
    end = object()
    with ThreadPoolExecutor(1, thread_name_prefix="ragsql-read") as pool:
        coming = pool.submit(next, items, end)
        while (item := coming.result()) is not end:
            coming = pool.submit(next, items, end)
            yield cast(T, item)  # not the end marker


def import_records(
    conn: psycopg.Connection,
    path: str | os.PathLike,
    fmt: str,
    dataset: str,
    run: str | None = None,
    skip_bad: bool = False,
    replace: bool = False,
    corpus: str | None = None,
    run_config: dict | None = None,
) -> ImportSummary:
    """Load JSONL or CSV eval-set records: queries, judgments and reference answers into the dataset, and
    with `run` the retrieved items (rank = list position) and answers with the contexts they used. Gold evidence
    that matches nothing in `corpus` (or, without one, spans and chunk ids no corpus holds) is in the summary.
    run_config: the configuration recorded with the run (default: the format and the file's path)."""
    path = str(path)
    _require_name("dataset", dataset)
    if run is not None:
        _require_name("run", run)
    summary = ImportSummary(dataset, run)

    def records(first: bool = False) -> Iterator[Record]:
        # Every pass meets the same bad records; only the first one reports them.
        on_error = None
        if skip_bad:
            on_error = (lambda line, message: summary.skipped.append((line, message))) if first else _ignore
        return parse_records(text_lines(path), fmt, path, on_error)

    scan = _Scan()
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    gold.require_corpus(conn, corpus)
    with conn.transaction():
        dataset_id = load.ensure_dataset(conn, dataset)
        summary.queries = load.add_queries(conn, dataset_id, scan.queries(records(first=True)))
        if not summary.queries:
            raise InputError(_no_records(fmt, summary.skipped), path)
        if run is None and (scan.results or scan.answers):
            raise InputError("records carry retrieved items or answers: pass --run NAME to store them as a run", path)
        if run is not None and not (scan.results or scan.answers):
            raise InputError(f"--run {run} given, but no record has retrieved items or an answer", path)
        summary.judgments = _add_labels(
            conn,
            _JUDGMENTS,
            dataset_id,
            dataset,
            scan.judged,
            path,
            replace,
            lambda: ((r.qid, docno, rel, text) for r in records() for docno, rel, text in r.judgments),
        )
        summary.spans = _add_labels(
            conn,
            _SPANS,
            dataset_id,
            dataset,
            scan.spanned,
            path,
            replace,
            lambda: ((r.qid, *span) for r in records() for span in r.spans),
        )
        summary.references = _add_labels(
            conn,
            _REFERENCES,
            dataset_id,
            dataset,
            scan.referenced,
            path,
            replace,
            lambda: ((r.qid, text) for r in records() for text in r.references),
        )
        if run is not None:
            config = run_config if run_config is not None else {"source": fmt, "file": os.path.abspath(path)}
            run_id = load.create_run(conn, run, dataset_id, config, replace=replace)
            if scan.results:
                summary.results = load.add_run_results(
                    conn,
                    run_id,
                    ((r.qid, *result) for r in records() for result in ranked(r)),
                )
            if scan.answers:
                summary.answers = load.add_answers(
                    conn,
                    run_id,
                    ((r.qid, r.answer, None) for r in records() if _answered(r)),
                    _answer_contexts(records()),
                )
            load.settle_run(conn, run_id)  # the replaced run goes last: dropping its partition locks run_result
        summary.unmatched = gold.dataset_unmatched(conn, dataset, corpus)
    _analyze(conn, idle)
    return summary


class _Scan:
    """What the first pass over the records saw: which queries carry labels, whether any carry run data."""

    def __init__(self) -> None:
        self.judged: list[str] = []
        self.spanned: list[str] = []
        self.referenced: list[str] = []
        self.results = self.answers = False

    def queries(self, records: Iterable[Record]) -> Iterator[tuple]:
        for r in records:
            if r.judgments:
                self.judged.append(r.qid)
            if r.spans:
                self.spanned.append(r.qid)
            if r.references:
                self.referenced.append(r.qid)
            self.results = self.results or bool(r.retrieved)
            self.answers = self.answers or _answered(r)
            yield r.qid, r.query, r.language, r.metadata


def _answered(record: Record) -> bool:
    """Whether the record is stored as an answer: it has one, or RAGAS's retrieved_context_ids without texts (an
    answer with a null text when it gives no response: the id metrics read its ids, the others say no answer)."""
    return record.answer is not None or record.context_ids


def _answer_contexts(records: Iterable[Record]) -> Iterator[tuple]:
    """(qid, position, docno, text) of the contexts of the records stored as an answer (_answered)."""
    for r in records:
        if _answered(r):
            yield from answer_contexts(r)


@dataclass(frozen=True)
class _Labels:
    """One kind of gold label an import checks against what the dataset already holds."""

    what: str
    stored: Callable[[psycopg.Connection, int, list[str]], dict]
    delete: Callable[[psycopg.Connection, int, list[str]], None]
    add: Callable[[psycopg.Connection, int, Iterable[tuple]], int]
    file: Callable[[dict, tuple], None]  # puts a row (qid first) of a stored query where `stored` has its value


def _by_docno(given: dict, row: tuple) -> None:
    given.setdefault(row[0], {})[row[1]] = row[2]


def _text(given: dict, row: tuple) -> None:
    given.setdefault(row[0], []).append(row[1])


def _span(given: dict, row: tuple) -> None:
    given.setdefault(row[0], []).append(row[1:])


_JUDGMENTS = _Labels("judgments", load.stored_judgments, load.delete_judgments, load.add_judgments, _by_docno)
_SPANS = _Labels("gold spans", load.stored_gold_spans, load.delete_gold_spans, load.add_gold_spans, _span)
_REFERENCES = _Labels(
    "reference answers",
    load.stored_reference_answers,
    load.delete_reference_answers,
    load.add_reference_answers,
    _text,
)


def _add_labels(
    conn: psycopg.Connection,
    labels: _Labels,
    dataset_id: int,
    dataset: str,
    qids: list[str],
    path: str,
    replace: bool,
    rows: Callable[[], Iterator[tuple]],
) -> int:
    """Load label rows (qid first); the stored labels of these queries must equal the file's unless replaced."""
    if not qids:
        return 0
    stored: dict = {}
    if replace:
        labels.delete(conn, dataset_id, qids)
    else:
        stored = labels.stored(conn, dataset_id, qids)
    given: dict = {}

    def new() -> Iterator[tuple]:
        for row in rows():
            if row[0] in stored:
                labels.file(given, row)
            else:
                yield row

    count = labels.add(conn, dataset_id, new())
    _require_same(dataset, labels.what, stored, given, path)
    return count


def _no_records(fmt: str, skipped: list[tuple[int, str]]) -> str:
    """Why a records file stored nothing: it holds no record, or every record was bad (skipped)."""
    if skipped:
        line, message = skipped[0]
        return f"no good record: all {len(skipped)} were bad (the first, line {line}: {message})"
    return "the file holds no records (it is empty" + (
        ", or only a header row)" if fmt == "csv" else ", or only blank lines)"
    )


def _require_same(dataset: str, what: str, stored: dict, given: dict, path: str) -> None:
    for qid, labels in stored.items():
        if given.get(qid) != labels:
            raise InputError(
                f'dataset "{dataset}" already holds other {what} for query {qid} (pass --replace to replace them)',
                path,
            )


def _require_name(what: str, name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"the {what} name must not be empty")


def _ignore(line: int, message: str) -> None:
    """Drop a bad record already reported by the first pass."""


def _analyze(conn: psycopg.Connection, idle: bool, tables: tuple[str, ...] = load.LOADED) -> None:
    """Refresh planner statistics of the tables an import wrote; commit them when the import ran in a
    transaction of its own."""
    load.analyze(conn, tables)
    if idle and not conn.autocommit:
        conn.commit()
