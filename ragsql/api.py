"""The Python API: evaluate records where a notebook has them (a list of dicts or a pandas DataFrame with RAGAS,
DeepEval or seed field names; RAGAS samples and datasets, DeepEval test cases) and read metrics and comparisons as
DataFrames. It runs the code the CLI runs: the same
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
import difflib
import hashlib
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import psycopg

from ragsql import db, registry
from ragsql.db import compare as db_compare, generation, metrics as db_metrics, names, scores as db_scores
from ragsql.db.compare import Resampling
from ragsql.errors import InputError, UsageError
from ragsql.formats import Record, parse_records
from ragsql.formats.values import INT_MAX, MAX_DEPTH, id_problem, text_problem
from ragsql.importer import ImportSummary, import_records

if TYPE_CHECKING:
    import pandas
    import sqlalchemy

    from ragsql.llm.settings import EndpointSettings
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
        return pandas.DataFrame([{"qid": q, "question": questions[q], **values[q]} for q in values], columns=columns)


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


def evaluate(
    records: Iterable[Mapping[str, Any]] | Iterable[Any] | pandas.DataFrame | Any,
    metrics: str | Sequence[str | Any] | Any | None = None,
    *,
    run: str | None = None,
    dataset: str | None = None,
    judge: str | None = None,
    database_url: str | None = None,
    workers: int = 8,
    rel_level: int = 1,
    replace: bool = False,
) -> Evaluation:
    """Store `records` as a dataset and a run, judge what the metrics need, and return the values.

    records: dicts (or DataFrame rows) with RAGAS (``user_input``, ``response``, ``retrieved_contexts``,
    ``reference``…), DeepEval (``input``, ``actual_output``, ``retrieval_context``…) or seed field names, as
    `ragsql import jsonl` reads them; a missing (None / NaN) field is absent; or a RAGAS EvaluationDataset, RAGAS
    SingleTurnSamples or DeepEval LLMTestCases. metrics: a metric name or a list of them: generation metrics
    (faithfulness, …, aspect:<name>, or RAGAS's and DeepEval's names and metric objects: docs/metrics.md) and
    retrieval measures (nDCG@10, …); default: every one the data allows. judge: None for the configured endpoint
    (else the offline judge), "offline", or a model name at the configured endpoint.

    Everything is checked before anything is stored: a bad record raises one InputError naming its index (and
    qid), a bad metric name or option one UsageError. The same call again (same records, metrics, dataset and
    judge) returns the stored run's values without judging anew; a run of that name stored with other inputs is
    an error unless replace=True, which stores the run again (and the records' labels in the dataset).
    """
    asked = _metric_names(metrics)
    _check_options(run, dataset, judge, workers, rel_level, replace)
    rows = _rows(records)
    lines = _lines(rows)
    parsed = _parsed(lines, rows)
    url = database_url or db.database_url()
    with connect(url) as conn:
        kinds = generation.metric_kinds(conn)
        gen, ret = (None, None) if asked is None else _split_metrics(conn, asked, kinds)
        has_answers = any(r.answer is not None for r in parsed)
        # RAGAS's id-based samples with no response are stored as answers without text: no judge, but values
        stored_answers = has_answers or any(r.context_ids for r in parsed)
        _require_inputs(parsed, gen, ret)
        task_kinds = (
            None
            if gen is None
            else [
                k
                for k in dict.fromkeys(
                    kinds[c] if c in kinds else registry.metric(c).task for c in (m.lower().strip() for m in gen)
                )
                if k is not None
            ]
        )
        needs_judge = has_answers and task_kinds != []  # text metrics (no task kind) need no judge
        settings = _judge_settings(judge) if needs_judge or judge is not None else None
        judge_id = (
            None
            if not needs_judge or settings is None
            else ("offline" if judge == "offline" or not settings.configured else settings.model)
        )
        dataset = dataset or "py-" + _digest(rows)[:10]
        inputs = _digest(
            {
                "records": rows,
                "metrics": None if asked is None else sorted(asked),
                "dataset": dataset,
                "judge": judge_id,
            }
        )
        # the default run name follows the inputs, so running the same cell again finds its run
        run = run or f"{dataset}-{inputs[:10]}"
        stored = _stored_inputs(conn, run)
    reuse = stored == inputs and not replace
    if stored is not None and not reuse and not replace:
        raise UsageError(
            f"run {run!r} already exists with other inputs (records, metrics, dataset or judge): "
            "pass replace=True to replace it, or another run name"
        )
    if not reuse:
        if needs_judge and settings is not None:
            _check_endpoint(settings, judge == "offline")
        config = {
            "source": "ragsql.evaluate",
            "inputs_sha256": inputs,
            "metrics": None if asked is None else asked,
            "judge": judge_id,
        }
        with connect(url) as conn:
            _import(conn, lines, rows, dataset, run, replace, config)
    failed, model = 0, None
    if needs_judge and settings is not None:  # again on reuse: done tasks cost nothing, failed ones are tried again
        failed, model = _judge(url, run, task_kinds, settings, judge == "offline", workers)
    with connect(url) as conn:
        judge_name = "offline" if model is not None and model.startswith("offline") else model
        scores, per_query = _values(conn, run, ret, gen if stored_answers else [], judge_name, rel_level)
    return Evaluation(run, dataset, judge_name, scores, per_query, failed)


def metrics(
    run: str,
    measures: Sequence[str] | None = None,
    *,
    judge: str | None = None,
    database_url: str | None = None,
    rel_level: int = 1,
) -> pandas.DataFrame:
    """A stored run's values as `ragsql scores` shows them: kind, measure, value, queries, covered, missing,
    judge_model (None for retrieval). measures: retrieval measures and generation metrics (default: all)."""
    import pandas

    with connect(database_url) as conn:
        names.run_id(conn, run)
        measures = None if measures is None else [_resolved(m) for m in measures]
        rows = db_scores.run_scores(conn, run, measures, judge=judge, rel_level=rel_level)
    return pandas.DataFrame(rows, columns=["kind", "measure", "value", "queries", "covered", "missing", "judge_model"])


def compare(
    run_a: str,
    run_b: str,
    measures: Sequence[str] | None = None,
    *,
    resamples: int = Resampling.resamples,
    seed: float = Resampling.seed,
    alpha: float = Resampling.alpha,
    judge: str | None = None,
    database_url: str | None = None,
    rel_level: int = 1,
) -> pandas.DataFrame:
    """run_b against run_a as `ragsql compare` computes it: per measure both values, the mean per-query
    difference with its bootstrap interval, randomization and t-test p-values (Holm-adjusted), counts."""
    import pandas

    with connect(database_url) as conn:
        names.run_id(conn, run_a)
        names.run_id(conn, run_b)
        rows = db_compare.compare(
            conn,
            run_a,
            run_b,
            [_resolved(m) for m in measures] if measures else None,
            Resampling(resamples, seed, alpha),
            rel_level,
            judge,
        )
    return pandas.DataFrame([dataclasses.asdict(r) for r in rows])


def synth(
    corpus: str,
    dataset: str,
    *,
    n: int = 100,
    kinds: Sequence[str] = ("single",),
    lang: str = "auto",
    style: str = "plain",
    seed: int = 0,
    offline: bool = False,
    model: str | None = None,
    database_url: str | None = None,
) -> SynthResult:
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
            return await synthesize(
                url, corpus, dataset, client, n=n, kinds=list(kinds), language=lang, seed=seed, style=style
            )
        finally:
            await client.aclose()

    return _run_async(written())


def _metric_names(metrics: object) -> list[str] | None:
    """The metric names asked for, once each in the order given, RAGAS's and DeepEval's names and metric objects as
    ragsql names them; a single name or object is one metric."""
    if metrics is None:
        return None
    if isinstance(metrics, str) or registry.resolve_object(metrics) is not None:
        metrics = [metrics]
    elif isinstance(metrics, (bytes, Mapping)) or not isinstance(metrics, Iterable):
        raise UsageError(f"metrics must be a metric name or a list of them, found {type(metrics).__name__}")
    names = []
    for item in metrics:
        if not isinstance(item, str):
            name = registry.resolve_object(item)
            if name is None:
                raise UsageError(
                    "metrics must be names (non-empty strings) or RAGAS or DeepEval metric objects, "
                    f"found {_short(item)}"
                )
            names.append(name)
            continue
        if not item.strip():
            raise UsageError(f"metrics must be names (non-empty strings), found {_short(item)}")
        if problem := text_problem(item):
            raise UsageError(f"the metric name {_short(item)} {problem[1]}")
        names.append(_resolved(item))
    if not names:
        raise UsageError("metrics is empty: name at least one metric, or pass None for every one the data allows")
    return list(dict.fromkeys(names))


def _resolved(name: str) -> str:
    """ragsql's name of a metric as RAGAS or DeepEval name it; a family named without its member is a UsageError."""
    try:
        return registry.resolve(name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_options(
    run: object, dataset: object, judge: object, workers: object, rel_level: object, replace: object
) -> None:
    """Raise UsageError for an option evaluate cannot use, before anything is stored."""
    for what, name in (("run", run), ("dataset", dataset), ("judge", judge)):
        if name is None:
            continue
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"{what} must be a non-empty string, found {_short(name)}")
        if problem := id_problem(name):
            raise UsageError(f"the {what} name {_short(name)} {problem}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"workers must be an integer of 1 or more, found {_short(workers)}")
    if isinstance(rel_level, bool) or not isinstance(rel_level, int) or abs(rel_level) > INT_MAX:
        raise UsageError(f"rel_level must be an integer grade (-{INT_MAX} to {INT_MAX}), found {_short(rel_level)}")
    if not isinstance(replace, bool):
        raise UsageError(f"replace must be True or False, found {_short(replace)}")


def _rows(records: object) -> list[dict[str, Any]]:
    """The records as plain JSON values without missing fields (None, NaN); a record that is not a mapping (or a
    RAGAS sample or DeepEval test case), a value that is not JSON or nested too deep is an InputError naming the
    record."""
    if hasattr(records, "to_dict") and hasattr(records, "columns"):  # a DataFrame, told without importing pandas
        frame = cast("pandas.DataFrame", records)
        if not frame.columns.is_unique:
            raise InputError("the DataFrame has a repeated column name")
        records = frame.to_dict("records")
    elif callable(getattr(records, "to_list", None)) and isinstance(getattr(records, "samples", None), list):
        records = list(cast("Any", records).samples)  # a RAGAS EvaluationDataset
    elif isinstance(getattr(records, "test_cases", None), list) and isinstance(getattr(records, "goldens", None), list):
        dataset = cast("Any", records)  # a DeepEval EvaluationDataset: its test cases, else its goldens
        records = list(dataset.test_cases or dataset.goldens)
        if not records:
            raise InputError("the DeepEval EvaluationDataset has no test cases and no goldens")
    elif _fields(records) is not None:  # one sample or test case (a pydantic model iterates over its fields)
        records = [records]
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
        raise InputError(
            "records must be a list of dicts, a pandas DataFrame, a RAGAS or DeepEval EvaluationDataset or a list of "
            "RAGAS SingleTurnSamples or DeepEval LLMTestCases or Goldens"
        )
    rows = []
    for i, given in enumerate(records):
        record = given if isinstance(given, Mapping) else _fields(given)
        if record is None:
            raise InputError(f"record {i}: a record must be a dict, found {type(given).__name__}")
        row: dict[str, Any] = {}
        for key, value in record.items():
            name = key if isinstance(key, str) else str(key)
            if name in row:
                raise InputError(
                    f"{_where(record, i)}: field {name!r} is given twice (two keys that read the same as text)"
                )
            if not _missing(value):
                try:
                    row[name] = _plain(value, name)
                except _NotJson as exc:
                    raise InputError(f"{_where(record, i)}: {exc}") from None
        rows.append(row)
    if not rows:
        raise InputError("no record to evaluate")
    return rows


def _fields(record: object) -> dict[str, Any] | None:
    """The fields of a RAGAS SingleTurnSample or DeepEval LLMTestCase (a pydantic model, or an older DeepEval's
    dataclass) that are set; None for another object."""
    if isinstance(record, type):
        return None
    if callable(getattr(record, "model_dump", None)):
        return cast("Any", record).model_dump(exclude_none=True)
    if dataclasses.is_dataclass(record):
        return {k: v for k, v in dataclasses.asdict(cast("Any", record)).items() if v is not None}
    return None


class _NotJson(ValueError):
    """A value the records cannot hold: not a JSON value, or nested deeper than MAX_DEPTH."""


def _missing(value: Any) -> bool:
    """None, NaN, and pandas' NA and NaT: an absent field."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    pandas = sys.modules.get("pandas")
    return (
        pandas is not None
        and type(value).__module__.startswith("pandas")
        and pandas.api.types.is_scalar(value)
        and bool(pandas.isna(value))
    )


def _plain(value: Any, field: str, depth: int = 0) -> Any:
    """numpy arrays and scalars (as pandas holds list cells and numbers), tuples and dates as JSON-ready Python
    values; nesting is counted as formats.values.check_storable counts it, without recursing past its limit."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (Mapping, list, tuple)):
        if depth >= MAX_DEPTH:
            raise _NotJson(f"{field} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, Mapping):
            return {k if isinstance(k, str) else str(k): _plain(v, field, depth + 1) for k, v in value.items()}
        return [_plain(v, field, depth + 1) for v in value]
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if _missing(value):
        return None
    raise _NotJson(
        f"{field} holds a {type(value).__name__}, which is not a JSON value (string, number, boolean, list, dict)"
    )


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    """A JSONL line per record; ASCII escapes carry a lone surrogate to the importer's checks, which name it."""
    lines = []
    for i, row in enumerate(rows):
        try:
            lines.append(json.dumps(row, ensure_ascii=True))
        except ValueError as exc:  # an integer of more than 4,300 digits (Python's limit on writing one)
            problem = "holds an integer too large to store" if "integer" in str(exc) else str(exc).split(";")[0]
            raise InputError(f"{_where(row, i)}: {problem}") from None
    return lines


def _parsed(lines: list[str], rows: list[dict[str, Any]]) -> list[Record]:
    """Every record read as `ragsql import jsonl` reads it (field names, types, NUL, lone surrogates, nesting,
    repeated qids…); the first bad one is an InputError naming its index and qid."""
    try:
        return list(parse_records(lines, "jsonl", _RECORDS))
    except InputError as exc:
        raise _at_record(exc, rows) from None


_RECORDS = "<records>"


def _at_record(exc: InputError, rows: list[dict[str, Any]]) -> InputError:
    """The importer's file:line error as `record <index> (qid <qid>): ...`, in the API's words."""
    message = str(exc).removeprefix(f"{exc.path}:{exc.line}: " if exc.line else f"{exc.path}: ")
    message = message.replace("(pass --replace to replace them)", "(pass replace=True to replace them)")
    message = re.sub(r"\(first on line (\d+)\)", lambda m: f"(first as record {int(m[1]) - 1})", message)
    return InputError(message if exc.line is None else f"{_where(rows[exc.line - 1], exc.line - 1)}: {message}")


def _where(record: Mapping[str, Any], index: int) -> str:
    """'record 3 (qid x-1)': the qid only when it can be shown as it is."""
    qid = next((record[k] for k in ("qid", "query_id", "id") if k in record), None)
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    shown = isinstance(qid, str) and qid.strip() and id_problem(qid) is None and len(qid) <= 80
    return f"record {index}" + (f" (qid {qid})" if shown else "")


def _short(value: object) -> str:
    """repr of a value for a message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _split_metrics(
    conn: psycopg.Connection, asked: list[str], kinds: Mapping[str, str | None]
) -> tuple[list[str], list[str]]:
    """The generation metrics and the retrieval measures asked for, each name checked by the SQL that will read
    it; an unknown name is a UsageError with the closest known one."""
    gen: list[str] = []
    ret: list[str] = []
    for name in asked:
        cleaned = name.lower().strip()
        generated = cleaned in kinds or registry.metric_or_none(cleaned) is not None
        spec = "ragsql._generation_metric_spec" if generated else "ragsql._measure_spec"
        try:
            conn.execute(f"select count(*) from {spec}(%s)", ([name],)).fetchone()
        except psycopg.errors.DataError as exc:
            conn.rollback()
            raise UsageError(_metric_problem(conn, name, exc.diag.message_primary or str(exc))) from None
        (gen if generated else ret).append(name)
    return gen, ret


def _metric_problem(conn: psycopg.Connection, name: str, problem: str) -> str:
    """The SQL's complaint about a metric name, with the closest known name when it is unknown."""
    if not problem.startswith(("unknown measure", "unknown generation metric", "unknown aspect")):
        return problem
    cleaned = name.lower().strip()
    if cleaned.startswith("aspect:"):  # an aspect's name is matched alone: the shared prefix would match anything
        what, cleaned, prefix = "aspect", cleaned.removeprefix("aspect:"), "aspect:"
        known = [a for (a,) in conn.execute("select name from ragsql.aspect order by name")]
    else:
        what, prefix = "metric", ""
        known = [*generation.metric_kinds(conn), *db_metrics.default_measures(conn)]
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(cleaned, by_lower, n=1, cutoff=0.6)
    hint = f"; did you mean {prefix + by_lower[close[0]]!r}?" if close else ""
    return (
        f"unknown {what} {_short(name)}{hint} (generation metrics: select metric from ragsql.generation_metric; "
        "aspects: aspect:<name> of ragsql.aspect; retrieval measures: nDCG@10, P@5, R@10, RR@10, AP, …)"
    )


def _require_inputs(records: list[Record], generated: list[str] | None, retrieval: list[str] | None) -> None:
    """The records hold what the metrics asked for need: answers for generation metrics, retrieved items for
    retrieval measures (a run with none would score 0, a number nobody measured)."""
    if not any(r.answer is not None or r.retrieved for r in records):
        raise InputError(
            "no record has retrieved items (retrieved_contexts, retrieved_ids) or an answer "
            "(response, answer): nothing to evaluate"
        )
    if generated and not any(r.answer is not None or r.context_ids for r in records):
        raise InputError(f"{generated[0]} needs answers, and no record has one (response or answer)")
    if retrieval and not any(r.retrieved for r in records):
        raise InputError(
            f"{retrieval[0]} needs retrieved items, and no record has any (retrieved_contexts or retrieved_ids)"
        )


def _digest(value: object) -> str:
    """sha256 hex of a JSON value, keys sorted."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def _stored_inputs(conn: psycopg.Connection, run: str) -> str | None:
    """The inputs digest evaluate recorded with the run; '' for a run stored otherwise, None for no run."""
    row = conn.execute(
        "select coalesce(config->>'inputs_sha256', '') from ragsql.run where name = %s", (run,)
    ).fetchone()
    return None if row is None else row[0]


def _import(
    conn: psycopg.Connection,
    lines: list[str],
    rows: list[dict[str, Any]],
    dataset: str,
    run: str,
    replace: bool,
    config: dict,
) -> ImportSummary:
    """The records through the JSONL importer (one transaction); its file:line errors become record index + qid."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        f.writelines(line + "\n" for line in lines)
    try:
        summary = import_records(conn, f.name, "jsonl", dataset, run, replace=replace, run_config=config)
        conn.commit()
        return summary
    except InputError as exc:
        conn.rollback()
        if "already exists" in str(exc) and exc.line is None:  # stored by another call since it was looked for
            raise UsageError(
                f"run {run!r} already exists with other inputs: pass replace=True to replace it, or another run name"
            ) from None
        raise _at_record(exc, rows) from None
    finally:
        os.unlink(f.name)


def _judge_settings(judge: str | None) -> EndpointSettings:
    """The endpoint settings the judge uses; a model named with no endpoint configured is a UsageError."""
    from ragsql.llm.settings import EndpointSettings

    return EndpointSettings.for_judge(judge, "pass judge='offline'")


def _check_endpoint(settings: EndpointSettings, offline: bool) -> None:
    """Raise JudgeError (one line) if the judge endpoint is unreachable, rejects the key or lacks the model."""
    from ragsql.orchestrator.setup import make_judging

    if offline or not settings.configured:
        return
    judging = make_judging(settings)

    async def checked() -> None:
        try:
            await judging.judge.check()
        finally:
            await judging.judge.aclose()
            await judging.embedder.aclose()

    _run_async(checked())


def _judge(
    url: str, run: str, kinds: list[str] | None, settings: EndpointSettings, offline: bool, workers: int
) -> tuple[int, str]:
    """Judge the run (the configured endpoint, offline, or the model named); failed tasks and the judge model."""
    from ragsql.llm.progress import progress
    from ragsql.orchestrator.runner import judge_run
    from ragsql.orchestrator.setup import make_judging

    judging = make_judging(settings, offline=offline)

    async def judged():
        from rich.console import Console

        try:  # a bar in a notebook or on a terminal (off in a script whose stderr is a pipe or file)
            with progress(Console(stderr=True), f"judging {run}", "tasks") as on_progress:
                return await judge_run(url, run, judging, metrics=kinds, workers=workers, on_progress=on_progress)
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


def _values(
    conn: psycopg.Connection,
    run: str,
    retrieval: list[str] | None,
    generated: list[str] | None,
    judge: str | None,
    rel_level: int,
) -> tuple[dict[str, float | None], list[dict[str, Any]]]:
    """Run values and per-query rows (qid, question, metric, value, reason) as `ragsql scores` reads them."""
    questions = db_metrics.question_texts(conn, run)
    scores: dict[str, float | None] = {}
    per_query: list[dict[str, Any]] = []
    if retrieval != []:
        values = [v for v in db_metrics.run_values(conn, run, retrieval, rel_level) if v.queries or retrieval]
        scores.update({v.measure: v.value for v in values})
        per_query += (
            [
                {"qid": v.qid, "question": questions.get(v.qid), "metric": v.measure, "value": v.value, "reason": None}
                for v in db_metrics.query_values(conn, run, [v.measure for v in values], rel_level)
            ]
            if values
            else []
        )
    if generated != []:
        rows = generation.run_generation(conn, run, generated, judge=judge)
        scores.update({r["metric"]: r["value"] for r in rows})
        per_query += [
            {
                "qid": r["qid"],
                "question": questions.get(r["qid"]),
                "metric": r["metric"],
                "value": r["value"],
                "reason": r["reason"],
            }
            for r in generation.query_generation(conn, run, [r["metric"] for r in rows], judge=judge)
        ]
    return scores, per_query
