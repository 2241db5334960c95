"""Measure a judge on labelled pairs: each pair's two sides become two runs, judged and scored as any run is.

The pairs of one file go into a dataset of their own (``judge-check-<hash of the pairs>``): a query per pair
(its question and reference), and per metric a run of the better sides and a run of the worse sides. The judge
is run on both with that metric alone, the per-query values are read back from SQL, and a pair counts 1 when
the better side scores strictly higher, ½ on a tie, 0 otherwise; a side with no value (NULL, with its reason)
counts as a tie and is reported; a group where no pair has a value has no accuracy (NULL). The dataset is deleted
afterwards unless kept; the judge-call cache stays, so checking again costs no call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ragsql import db as dbconn
from ragsql.db import catalog, generation, load
from ragsql.formats import context_docno
from ragsql.formats.pairs import Pair, Side
from ragsql.orchestrator.runner import judge_run
from ragsql.orchestrator.service import Judging, Tally

__all__ = ["PairCheck", "PairOutcome", "check_pairs", "dataset_name"]


@dataclass(frozen=True)
class PairOutcome:
    """One pair's two values and what they say: 1 better strictly higher, 0.5 tie or missing value, 0 worse."""

    pair: Pair
    better: float | None
    worse: float | None
    why_missing: str | None

    @property
    def credit(self) -> float:
        if self.better is None or self.worse is None or self.better == self.worse:
            return 0.5
        return 1.0 if self.better > self.worse else 0.0


@dataclass
class PairCheck:
    """The outcome of every pair, what the judge cost, and the judge's name."""

    judge: str
    offline: bool
    dataset: str
    outcomes: list[PairOutcome] = field(default_factory=list)
    tally: Tally | None = None
    failed_tasks: int = 0

    def summary(self, by: Sequence[str] = ("metric", "language")) -> list[dict]:
        """Pairwise accuracy per group (None when no pair has a value): pairs, accuracy, and how many were won,
        tied, lost or had no value."""
        groups: dict[tuple, list[PairOutcome]] = {}
        for o in self.outcomes:
            key = tuple(getattr(o.pair, name) or "" for name in by)
            groups.setdefault(key, []).append(o)
        rows = []
        for key, items in sorted(groups.items()):
            valued = [o for o in items if o.why_missing is None]
            # no pair with a value: no accuracy at all (NULL), not the ties' 0.5
            rows.append(
                {
                    **dict(zip(by, key)),
                    "pairs": len(items),
                    "accuracy": round(sum(o.credit for o in items) / len(items), 4) if valued else None,
                    "better": sum(o.credit == 1.0 for o in items),
                    "ties": sum(o.credit == 0.5 and o.why_missing is None for o in items),
                    "worse": sum(o.credit == 0.0 for o in items),
                    "no_value": sum(o.why_missing is not None for o in items),
                }
            )
        return rows


def dataset_name(pairs: Sequence[Pair]) -> str:
    """The dataset the pairs are judged in: named by a hash of their content, so a new file never mixes in."""
    digest = hashlib.sha256()
    for p in pairs:
        digest.update(
            json.dumps(
                [
                    p.id,
                    p.metric,
                    p.question,
                    p.language,
                    p.reference,
                    p.better.answer,
                    p.better.contexts,
                    p.worse.answer,
                    p.worse.contexts,
                ],
                ensure_ascii=False,
            ).encode()
        )
    return "judge-check-" + digest.hexdigest()[:12]


async def check_pairs(
    url: str,
    pairs: Sequence[Pair],
    judging: Judging,
    *,
    workers: int = 8,
    keep: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> PairCheck:
    """Judge both sides of every pair with `judging` and score them; see the module docstring."""
    dataset = dataset_name(pairs)
    metrics = list(dict.fromkeys(p.metric for p in pairs))
    with dbconn.connect(url) as conn:
        _store(conn, dataset, pairs, metrics)
    check = PairCheck(
        judge="offline" if judging.judge.offline else judging.model,
        offline=judging.judge.offline,
        dataset=dataset,
        tally=judging.tally,
    )
    try:
        values: dict[tuple[str, str], dict[str, tuple[float | None, str | None]]] = {}
        for metric in metrics:
            for side in ("better", "worse"):
                run = f"{dataset}:{metric}:{side}"
                progress = (lambda done, total, run=run: on_progress(run, done, total)) if on_progress else None
                result = await judge_run(url, run, judging, metrics=[metric], workers=workers, on_progress=progress)
                check.failed_tasks += result.failed
                with dbconn.connect(url) as conn:
                    rows = generation.query_generation(conn, run, [metric], judge=check.judge)
                values[metric, side] = {r["qid"]: (_number(r["value"]), r.get("reason")) for r in rows}
        for p in pairs:
            better, b_why = values[p.metric, "better"].get(p.id, (None, "not judged"))
            worse, w_why = values[p.metric, "worse"].get(p.id, (None, "not judged"))
            missing = (
                None
                if better is not None and worse is not None
                else (f"better: {b_why}" if better is None else f"worse: {w_why}")
            )
            check.outcomes.append(PairOutcome(p, better, worse, missing))
    finally:
        if not keep:
            with dbconn.connect(url) as conn:
                catalog.delete(conn, "dataset", dataset)
                conn.commit()
    return check


def _store(conn, dataset: str, pairs: Sequence[Pair], metrics: list[str]) -> None:
    """A fresh dataset holding the pairs as queries, and a better and a worse run per metric."""
    with conn.transaction():
        catalog.delete(conn, "dataset", dataset)
        dataset_id = load.ensure_dataset(conn, dataset, "labelled judge pairs (ragsql judge-check)")
        load.add_queries(conn, dataset_id, ((p.id, p.question, p.language, {"kind": p.kind}) for p in pairs))
        load.add_reference_answers(conn, dataset_id, ((p.id, p.reference) for p in pairs if p.reference))
        for metric in metrics:
            chosen = [p for p in pairs if p.metric == metric]
            for side in ("better", "worse"):
                run_id = load.create_run(
                    conn,
                    f"{dataset}:{metric}:{side}",
                    dataset_id,
                    {"source": "judge-check", "side": side, "metric": metric},
                    replace=True,
                )
                sides = [(p, getattr(p, side)) for p in chosen]
                load.add_answers(
                    conn,
                    run_id,
                    ((p.id, _answer(p, s), None) for p, s in sides),
                    ((p.id, i, context_docno(c), c) for p, s in sides for i, c in enumerate(s.contexts, 1)),
                )
                load.settle_run(conn, run_id)
    load.analyze(conn)
    conn.commit()


def _answer(pair: Pair, side: Side) -> str:
    """The side's answer; a contexts-only pair stores its reference, else its question, as the run's answer row
    (context_relevance does not read it; context_precision reads the reference first)."""
    return side.answer if side.answer is not None else (pair.reference or pair.question)


def _number(value) -> float | None:
    return None if value is None else float(value)
