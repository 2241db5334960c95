"""Review sheets: written for people to label (JSONL: one query per line; CSV: one item per row), and read
back as labels, each bad line reported as file:line."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragsql.errors import InputError
from ragsql.formats.values import text_problem

__all__ = ["CSV_COLUMNS", "VERDICTS", "SheetLabel", "read_labels", "sheet_csv", "sheet_jsonl"]

VERDICTS = ("supported", "partial", "unsupported", "contradicted")
CSV_COLUMNS = [
    "run",
    "qid",
    "metric",
    "item",
    "question",
    "answer",
    "reference",
    "contexts",
    "statement",
    "judge",
    "judge_model",
    "reason",
    "reviewer",
    "label",
]


@dataclass(frozen=True)
class SheetLabel:
    """A label as the file gives it, checked for type and range, not yet against the database."""

    line: int
    run: str
    qid: str
    metric: str
    item: str
    reviewer: str
    score: float | None
    verdict: str | None
    judge_model: str | None
    judge_value: float | None
    judge_verdict: str | None


def sheet_jsonl(items: Sequence) -> str:
    """One JSON object per sampled query, every label null for the reviewer to fill in."""
    return "".join(
        json.dumps(
            {
                "run": i.run,
                "qid": i.qid,
                "reviewer": None,
                "question": i.question,
                "answer": i.answer,
                "references": i.references,
                "contexts": i.contexts,
                "metrics": i.metrics,
                "statements": i.statements,
            },
            ensure_ascii=False,
        )
        + "\n"
        for i in items
    )


def sheet_csv(items: Sequence) -> str:
    """One row per metric value and per statement verdict, the label column empty."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for i in items:
        common = {
            "run": i.run,
            "qid": i.qid,
            "question": i.question,
            "answer": i.answer,
            "reference": " / ".join(i.references),
            "contexts": "\n---\n".join(i.contexts),
        }
        for metric, value in i.metrics.items():
            writer.writerow(
                {**common, "metric": metric, "item": "", "judge": value["judge"], "judge_model": value["judge_model"]}
            )
        for s in i.statements:
            writer.writerow(
                {
                    **common,
                    "metric": s["metric"],
                    "item": s["item"],
                    "statement": s["statement"],
                    "judge": s["judge"],
                    "judge_model": s["judge_model"],
                    "reason": s["reason"],
                }
            )
    return buffer.getvalue()


def _score(value, where: str) -> float:
    if isinstance(value, bool):  # JSON true is not the label 1: a sheet's type is the documented one or refused
        raise ValueError(
            f"{where}: the label must be a number between 0 and 1, not the JSON boolean {str(value).lower()}"
        )
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{where}: the label must be a number between 0 and 1, not {value!r}") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"{where}: the label must be a number between 0 and 1, not {value!r}")
    return float(value)


def _verdict(value, where: str) -> str:
    if not isinstance(value, str) or value.strip().lower() not in VERDICTS:
        raise ValueError(f"{where}: the label must be one of {', '.join(VERDICTS)}, not {value!r}")
    return value.strip().lower()


def _judge_value(value) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def _label(line: int, run, qid, metric, item: str, reviewer, raw, judge_model, judge) -> SheetLabel:
    where = f"{metric}{' ' + item if item else ''}"
    for name, value in (("run", run), ("qid", qid), ("metric", metric)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} is missing")
    for name, value in (
        ("run", run),
        ("qid", qid),
        ("metric", metric),
        ("item", item),
        ("reviewer", reviewer),
        ("judge_model", judge_model),
    ):
        if isinstance(value, str) and (problem := text_problem(value)):
            raise ValueError(f"{name} {problem[1]}")
    if judge_model is not None and not isinstance(judge_model, str):
        raise ValueError(f"judge_model must be a string, not {judge_model!r}")
    if not isinstance(reviewer, str) or not reviewer.strip():
        raise ValueError("no reviewer: give one in the file (reviewer) or with --reviewer")
    if item:
        return SheetLabel(
            line,
            run,
            qid,
            metric,
            item,
            reviewer.strip(),
            None,
            _verdict(raw, where),
            judge_model or None,
            None,
            judge if judge in VERDICTS else None,
        )
    return SheetLabel(
        line,
        run,
        qid,
        metric,
        "",
        reviewer.strip(),
        _score(raw, where),
        None,
        judge_model or None,
        _judge_value(judge),
        None,
    )


def _labelled(metrics: dict, statements: list) -> Iterator[tuple[object, str, dict]]:
    """(metric, item, labelled entry) of a sheet line's labelled metrics (item "") then labelled statements."""
    for metric, value in metrics.items():
        if isinstance(value, dict) and value.get("label") is not None:
            yield metric, "", value
    for s in statements:
        if isinstance(s, dict) and s.get("label") is not None:
            item = s.get("item")
            if not isinstance(item, str) or not item:
                raise ValueError("a labelled statement has no item")
            yield s.get("metric"), item, s


def _jsonl_labels(text: str, reviewer: str | None) -> Iterator[tuple[int, SheetLabel | None, str | None]]:
    for number, raw_line in enumerate(text.splitlines(), 1):
        if not raw_line.strip():
            continue
        try:
            record = json.loads(raw_line)
            if not isinstance(record, dict):
                raise ValueError("a line must be a JSON object (one query of the review sheet)")
            who = record.get("reviewer") or reviewer
            metrics = record.get("metrics") or {}
            statements = record.get("statements") or []
            if not isinstance(metrics, dict) or not isinstance(statements, list):
                raise ValueError("metrics must be an object and statements a list, as the exported sheet has them")
            for metric, item, value in _labelled(metrics, statements):
                yield (
                    number,
                    _label(
                        number,
                        record.get("run"),
                        record.get("qid"),
                        metric,
                        item,
                        who,
                        value["label"],
                        value.get("judge_model"),
                        value.get("judge"),
                    ),
                    None,
                )
        except json.JSONDecodeError as exc:
            yield number, None, f"not JSON: {exc.msg}"
        except RecursionError:
            yield number, None, "not JSON: nested too deeply"
        except ValueError as exc:
            yield number, None, str(exc)


def _csv_labels(text: str, reviewer: str | None) -> Iterator[tuple[int, SheetLabel | None, str | None]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = {"run", "qid", "metric", "item", "label"} - set(reader.fieldnames or [])
    if missing:
        yield 1, None, f"the header lacks {', '.join(sorted(missing))} (export a sheet with --format csv)"
        return
    for row in reader:
        number = reader.line_num
        if not (row.get("label") or "").strip():
            continue
        try:
            yield (
                number,
                _label(
                    number,
                    row["run"],
                    row["qid"],
                    row["metric"],
                    (row.get("item") or "").strip(),
                    (row.get("reviewer") or "").strip() or reviewer,
                    row["label"].strip(),
                    row.get("judge_model"),
                    row.get("judge"),
                ),
                None,
            )
        except ValueError as exc:
            yield number, None, str(exc)


def read_labels(path: Path, reviewer: str | None = None) -> list[SheetLabel]:
    """Every filled-in label of a review sheet (.csv by its suffix, else JSONL); InputError at the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the review file: {exc}", str(path)) from None
    parse = _csv_labels if path.suffix.lower() == ".csv" else _jsonl_labels
    labels = []
    for line, label, error in parse(text, reviewer):
        if error is not None:
            raise InputError(error, str(path), line)
        labels.append(label)
    if not labels:
        raise InputError("no label filled in: every label of the sheet is empty", str(path))
    return labels
