"""The Python API: evaluate records where a notebook has them (a list of dicts or a pandas DataFrame, with RAGAS
or seed field names) and read metrics and comparisons as DataFrames. It runs the code the CLI runs: the same
importer, judge and SQL, so values equal `ragsql scores` / `compare` for the same run.

    import ragsql
    result = ragsql.evaluate(records, metrics=["faithfulness", "context_recall", "nDCG@10"])
    result.scores          # {metric: run value}
    result.to_pandas()     # one row per query; a NULL is NaN with its reason in <metric>_reason
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from ragsql import db
from ragsql.db import compare as db_compare
from ragsql.db import generation, metrics as db_metrics, names
from ragsql.db.compare import Resampling
from ragsql.errors import InputError, UsageError
from ragsql.importer import ImportSummary, import_records

if TYPE_CHECKING:
    import pandas
    import sqlalchemy

    from ragsql.synthesis import SynthResult

__all__ = ["Evaluation", "compare", "connect", "engine", "evaluate", "metrics", "synth"]


@dataclasses.dataclass
class Evaluation:
    """What `evaluate` stored and measured: the run and dataset names, the judge, each metric's run value
    (`scores`), the per-query values, and how many judge tasks failed (their values are NULL with a reason)."""

    run: str
    dataset: str
    judge: str | None
    scores: dict[str, float | None]
    per_query: list[dict[str, Any]]
    failed_tasks: int = 0

    def to_pandas(self) -> pandas.DataFrame:
        """One row per query: qid, question, a column per metric (NaN where NULL) and <metric>_reason."""
        import pandas

        questions: dict[str, str | None] = {}
        values: dict[str, dict[str, Any]] = {}
        for row in self.per_query:
            questions.setdefault(row["qid"], row.get("question"))
            cells = values.setdefault(row["qid"], {})
            cells[row["metric"]] = math.nan if row["value"] is None else float(row["value"])
            cells[f"{row['metric']}_reason"] = row.get("reason")
        columns = ["qid", "question", *self.scores, *(f"{m}_reason" for m in self.scores)]
        return pandas.DataFrame([{"qid": q, "question": questions[q], **values[q]} for q in values],
                                columns=columns)


def connect(database_url: str | None = None) -> psycopg.Connection:
    """A psycopg connection to ragsql's database (RAGSQL_DATABASE_URL, else the embedded server), schema ready."""
    conn = db.connect(database_url)
    db.ensure_schema(conn)
    conn.commit()
    return conn


def engine(database_url: str | None = None) -> sqlalchemy.Engine:
    """A SQLAlchemy engine on ragsql's database, e.g. for ``pandas.read_sql("select * from ragsql.run_measure",
    ragsql.engine())``."""
    with connect(database_url):
        pass
    return db.engine(database_url)


def evaluate(records: Iterable[Mapping[str, Any]] | pandas.DataFrame, metrics: Sequence[str] | None = None, *,
             run: str | None = None, dataset: str | None = None, judge: str | None = None,
             database_url: str | None = None, workers: int = 8, rel_level: int = 1) -> Evaluation:
    """Store `records` as a dataset and a run, judge what the metrics need, and return the values.

    records: dicts (or DataFrame rows) with RAGAS (``user_input``, ``response``, ``retrieved_contexts``,
    ``reference``…) or seed field names, as `ragsql import jsonl` reads them; a missing (None / NaN) field is
    absent. metrics: generation metrics (faithfulness, …, aspect:<name>) and retrieval measures (nDCG@10, …);
    default: every one the data allows. judge: None for the configured endpoint (else the offline judge),
    "offline", or a model name at the configured endpoint. A bad record raises one InputError naming its index
    (and qid); nothing of it is stored.
    """
    rows = _rows(records)
    url = database_url or db.database_url()
    with connect(url) as conn:
        kinds = generation.metric_kinds(conn)
        asked = list(dict.fromkeys(metrics)) if metrics is not None else None
        gen = None if asked is None else [m for m in asked if m.lower().strip() in kinds or m.startswith("aspect:")]
        ret = None if asked is None else [m for m in asked if m not in gen]
        dataset = dataset or "py-" + hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:10]
        run = run or f"{dataset}-{datetime.datetime.now():%Y%m%d-%H%M%S-%f}"
        has_answers = _import(conn, rows, dataset, run).answers > 0
    failed, model = 0, None
    task_kinds = None if gen is None else [k for k in dict.fromkeys(
        "aspect_critique" if m.startswith("aspect:") else kinds[m.lower().strip()] for m in gen) if k is not None]
    if has_answers and task_kinds != []:  # text metrics (no task kind) need no judge
        failed, model = _judge(url, run, task_kinds, judge, workers)
    with connect(url) as conn:
        judge_name = "offline" if model is not None and model.startswith("offline") else model
        scores, per_query = _values(conn, run, ret, gen if has_answers else [], judge_name, rel_level)
    return Evaluation(run, dataset, judge_name, scores, per_query, failed)


def metrics(run: str, measures: Sequence[str] | None = None, *, judge: str | None = None,
            database_url: str | None = None, rel_level: int = 1) -> pandas.DataFrame:
    """A stored run's values as `ragsql scores` shows them: kind, measure, value, queries, covered, missing,
    judge_model (None for retrieval). measures: retrieval measures and generation metrics (default: all)."""
    import pandas

    with connect(database_url) as conn:
        names.run_id(conn, run)
        kinds = generation.metric_kinds(conn)
        gen = None if measures is None else [m for m in measures if m.lower().strip() in kinds or m.startswith("aspect:")]
        ret = None if measures is None else [m for m in measures if m not in gen]
        rows = [{"kind": "retrieval", "measure": v.measure, "value": v.value, "queries": v.queries,
                 "covered": v.queries - v.missing, "missing": v.missing, "judge_model": None}
                for v in (db_metrics.run_values(conn, run, ret, rel_level) if ret != [] else []) if v.queries]
        rows += [{"kind": "generation", "measure": r["metric"], "value": r["value"], "queries": r["queries"],
                  "covered": r["covered"], "missing": r["missing"], "judge_model": r["judge_model"]}
                 for r in (generation.run_generation(conn, run, gen, judge=judge) if gen != [] else [])]
    return pandas.DataFrame(rows, columns=["kind", "measure", "value", "queries", "covered", "missing", "judge_model"])


def compare(run_a: str, run_b: str, measures: Sequence[str] | None = None, *,
            resamples: int = Resampling.resamples, seed: float = Resampling.seed, alpha: float = Resampling.alpha,
            judge: str | None = None, database_url: str | None = None, rel_level: int = 1) -> pandas.DataFrame:
    """run_b against run_a as `ragsql compare` computes it: per measure both values, the mean per-query
    difference with its bootstrap interval, randomization and t-test p-values (Holm-adjusted), counts."""
    import pandas

    with connect(database_url) as conn:
        names.run_id(conn, run_a)
        names.run_id(conn, run_b)
        rows = db_compare.compare(conn, run_a, run_b, list(measures) if measures else None,
                                  Resampling(resamples, seed, alpha), rel_level, judge)
    return pandas.DataFrame([dataclasses.asdict(r) for r in rows])


def synth(corpus: str, dataset: str, *, n: int = 100, kinds: Sequence[str] = ("single",), lang: str = "auto",
          style: str = "plain", seed: int = 0, offline: bool = False, model: str | None = None,
          database_url: str | None = None) -> SynthResult:
    """Write `n` eval questions from an ingested corpus into `dataset`, as `ragsql synth` does: each with its
    reference answer and gold evidence as document spans; kinds single / multi / comparison; the configured
    endpoint's LLM (or `model` there), else — or with `offline` — deterministic clozes. Returns the questions
    kept (`.questions`) and why others were dropped (`.dropped`)."""
    from ragsql.generate import make_generator
    from ragsql.llm.settings import EndpointSettings
    from ragsql.synthesis import synthesize

    if n < 1:
        raise InputError(f"n must be 1 or more, got {n}")
    url = database_url or db.database_url()
    with connect(url):
        pass
    client = make_generator(EndpointSettings.from_env(model=model), offline=offline)

    async def written() -> SynthResult:
        try:
            return await synthesize(url, corpus, dataset, client, n=n, kinds=list(kinds), language=lang, seed=seed,
                                    style=style)
        finally:
            await client.aclose()

    return _run_async(written())


def _rows(records: Iterable[Mapping[str, Any]] | pandas.DataFrame) -> list[dict[str, Any]]:
    """The records as plain dicts without missing fields (None, NaN); a record that is not a mapping is an error."""
    if hasattr(records, "to_dict") and hasattr(records, "columns"):
        records = records.to_dict("records")
    if isinstance(records, (str, bytes)) or not isinstance(records, Iterable):
        raise InputError("records must be a list of dicts or a pandas DataFrame")
    rows = []
    for i, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise InputError(f"record {i}: a record must be a dict, found {type(record).__name__}")
        rows.append({str(k): _plain(v) for k, v in record.items() if not _missing(v)})
    if not rows:
        raise InputError("no record to evaluate")
    return rows


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _plain(value: Any) -> Any:
    """numpy arrays and scalars (as pandas holds list cells and numbers) as JSON-ready Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _import(conn: psycopg.Connection, rows: list[dict[str, Any]], dataset: str, run: str) -> ImportSummary:
    """The records through the JSONL importer (one transaction); its file:line errors become record index + qid."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    try:
        summary = import_records(conn, f.name, "jsonl", dataset, run)
        conn.commit()
        return summary
    except InputError as exc:
        conn.rollback()
        if exc.line is None:
            raise InputError(str(exc).removeprefix(f"{f.name}: ")) from None
        index = exc.line - 1
        qid = next((rows[index].get(k) for k in ("qid", "query_id", "id") if k in rows[index]), None)
        where = f"record {index}" + (f" (qid {qid})" if qid is not None else "")
        raise InputError(f"{where}: {str(exc).removeprefix(f'{f.name}:{exc.line}: ')}") from None
    finally:
        os.unlink(f.name)


def _judge(url: str, run: str, kinds: list[str] | None, judge: str | None, workers: int) -> tuple[int, str]:
    """Judge the run (the configured endpoint, offline, or the model named); failed tasks and the judge model."""
    from ragsql.llm.settings import EndpointSettings
    from ragsql.orchestrator.runner import judge_run
    from ragsql.orchestrator.setup import make_judging

    settings = EndpointSettings.from_env(model=None if judge in (None, "offline") else judge)
    if judge not in (None, "offline") and not settings.configured:
        raise UsageError(f"judge {judge!r} needs an endpoint: set RAGSQL_JUDGE_BASE_URL and RAGSQL_JUDGE_API_KEY "
                         "(or OPENAI_*), or pass judge='offline'")
    judging = make_judging(settings, offline=judge == "offline")

    async def judged():
        await judging.judge.check()
        try:
            return await judge_run(url, run, judging, metrics=kinds, workers=workers)
        finally:
            await judging.judge.aclose()
            await judging.embedder.aclose()

    result = _run_async(judged())
    return result.failed, judging.judge.model


def _run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run, also from a notebook whose event loop is already running (then in a worker thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _values(conn: psycopg.Connection, run: str, retrieval: list[str] | None, generated: list[str] | None,
            judge: str | None, rel_level: int) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    """Run values and per-query rows (qid, question, metric, value, reason) as `ragsql scores` reads them."""
    questions = db_metrics.question_texts(conn, run)
    scores: dict[str, float | None] = {}
    per_query: list[dict[str, Any]] = []
    if retrieval != []:
        values = [v for v in db_metrics.run_values(conn, run, retrieval, rel_level) if v.queries or retrieval]
        scores.update({v.measure: v.value for v in values})
        per_query += [{"qid": v.qid, "question": questions.get(v.qid), "metric": v.measure, "value": v.value,
                       "reason": None} for v in db_metrics.query_values(conn, run, [v.measure for v in values],
                                                                         rel_level)] if values else []
    if generated != []:
        rows = generation.run_generation(conn, run, generated, judge=judge)
        scores.update({r["metric"]: r["value"] for r in rows})
        per_query += [{"qid": r["qid"], "question": questions.get(r["qid"]), "metric": r["metric"],
                       "value": r["value"], "reason": r["reason"]}
                      for r in generation.query_generation(conn, run, [r["metric"] for r in rows], judge=judge)]
    return scores, per_query
