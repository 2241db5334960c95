"""`ragsql watch run`: capture a production log's new rows into its windows' runs, exactly once, then judge those
runs through the judge queue (ragsql.orchestrator.runner), which several processes share without buying a reply
twice.

A capture is one REPEATABLE READ transaction taken under the watch's advisory lock: the rows it reads
(ragsql._watch_new_rows), what it stores through the importer's loads (ragsql.db.load) and the watermark it
leaves are all of one snapshot, so a capture that fails stores nothing and the next one reads the same rows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from ragsql.db import connect, load, watches
from ragsql.formats.records import Record, answer_contexts, ranked, retrieved_of
from ragsql.llm.settings import EndpointSettings
from ragsql.orchestrator.runner import judge_run
from ragsql.orchestrator.service import Judging

__all__ = ["Captured", "Wakeup", "WatchRun", "capture", "expire", "judge_windows", "make_watch_judging", "names_to_run"]


@dataclass
class Captured:
    """What one capture stored: rows with an answer, sampled rows stored without one, and the windows touched."""

    rows: int = 0
    skipped: int = 0
    windows: list[str] = field(default_factory=list)


@dataclass
class WatchRun:
    """What `watch run --once` did for one watch."""

    watch: str
    paused: bool = False
    captured: Captured = field(default_factory=Captured)
    judged_runs: list[str] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    calls: int = 0
    over_budget: int = 0  # rows left unjudged (marked skipped) because their window's budget was spent
    errors: list[tuple[str, str, str]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # metric: why no window could be judged on it
    expired: list[str] = field(default_factory=list)  # windows deleted by the watch's --keep


def capture(url: str, name: str) -> Captured:
    """Store the watch's new sampled rows in their windows' runs and advance its watermark, in one transaction."""
    result = Captured()
    with connect(url, autocommit=True) as conn:
        watch = watches.get(conn, name)
        watches.lock(conn, watch.id)
        try:
            # the snapshot is taken by the first statement, after the lock: it sees the last capture's watermark
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with conn.transaction():
                watch = watches.get(conn, name)
                if watch.paused:  # paused since the caller looked
                    return result
                watches.check_source(conn, watch.source_schema, watch.source_table, watch.columns, watch.name)
                seen: set[str] = set()
                for rows in watches.new_rows(conn, watch.id):
                    # a key the source holds twice is captured once: its first row
                    fresh = [r for r in rows if r[0] not in seen]
                    seen.update(r[0] for r in fresh)
                    if fresh:
                        _store(conn, watch, fresh, result)
                watches.advance(conn, watch.id)
        finally:
            conn.isolation_level = None
            if not conn.broken:
                watches.unlock(conn, watch.id)
    return result


def _store(conn: psycopg.Connection, watch: watches.Watch, rows: list[tuple], result: Captured) -> None:
    """One chunk of captured rows, window by window: a query per row (qid = key) in the window's dataset with its
    reference, and its answer and contexts in the window's run (see _retrieval for a row with retrieved ids)."""
    by_window: dict = {}
    for row in rows:
        by_window.setdefault(row[2], []).append(row)
    for start, items in sorted(by_window.items()):
        run_id, dataset_id = watches.window_run(conn, watch, start)
        queries, references, answers, contexts, results = [], [], [], [], []
        for key, time, _, question, answer, texts, reference, ids in items:
            skipped = {"skipped": "no answer"} if answer is None or not answer.strip() else {}
            if not skipped:
                try:
                    used, ranking = _retrieval(key, texts or [], ids or [])
                except ValueError as exc:  # ids an import refuses: the row is kept, unjudged, with the reason
                    skipped = {"skipped": f"--retrieved: {exc}"}
                else:
                    answers.append((key, answer, None))
                    contexts += used
                    results += ranking
            queries.append((key, question, None, {"time": time.isoformat(), **skipped}))
            if reference is not None and reference.strip():
                references.append((key, reference))
        load.add_queries(conn, dataset_id, queries)
        if references:
            load.add_reference_answers(conn, dataset_id, references)
        if answers:
            load.add_answers(conn, run_id, answers, contexts)
        if results:
            load.add_run_results(conn, run_id, results)
        watches.count(conn, watch.id, start, len(answers), len(items) - len(answers))
        result.rows += len(answers)
        result.skipped += len(items) - len(answers)
        if (name := watches.run_name(watch.name, start)) not in result.windows:
            result.windows.append(name)


def _retrieval(key: str, texts: list[str], ids: list[str]) -> tuple[list[tuple], list[tuple]]:
    """The answer's contexts (qid, position, docno, text) and the run's results (qid, rank, docno, score, text) of
    a row: with retrieved ids, as `import jsonl` stores a record with those retrieved_context_ids (and the texts as
    its retrieved_contexts); without, the texts alone, with no id and no ranking. A ValueError where import
    refuses the record."""
    if not ids:
        return [(key, position, None, text) for position, text in enumerate(texts, start=1)], []
    retrieved, ids_alone = retrieved_of(texts, ids)
    record = Record(0, key, None, retrieved=retrieved, context_ids=ids_alone)
    return list(answer_contexts(record)), [(key, *item) for item in ranked(record)]


def make_watch_judging(judge: str | None) -> Judging:
    """The judge a watch names: offline, a model at the configured endpoint, or (None) the endpoint else offline."""
    from ragsql.orchestrator.setup import make_judging  # imports openai: only when judging

    settings = EndpointSettings.for_judge(judge, "change the watch's judge to offline")
    return make_judging(settings, offline=judge == "offline")


async def judge_windows(url: str, watch: watches.Watch, judging: Judging, report: WatchRun, workers: int) -> None:
    """Judge every window of the watch whose captured rows are not all judged, oldest first; a window whose every
    answer has all its tasks done, or that no metric asked can judge, is recorded as judged."""
    with connect(url) as conn:
        todo = watches.to_judge(conn, watch.id)
    for run, run_id, rows in todo:
        if watch.budget is not None and _over_budget(url, watch.budget, run_id, rows, report, spent=False):
            continue  # spent by earlier runs: the window's new rows are skipped without a call
        result = await judge_run(url, run, judging, metrics=watch.metrics, workers=workers, budget=watch.budget)
        if watch.budget is not None:
            _over_budget(url, watch.budget, run_id, rows, report, spent=result.over_budget > 0)
        report.judged_runs.append(run)
        report.done += result.done
        report.failed += result.failed
        report.errors += result.errors[: max(0, 20 - len(report.errors))]
        report.skipped.update(result.skipped)
        with connect(url) as conn:
            # a window none of the metrics can judge (e.g. no contexts for faithfulness) is done as well
            if not result.kinds or watches.unfinished(conn, run_id) == 0:
                watches.judged(conn, run_id, rows)
                conn.commit()
    report.calls = judging.tally.calls


def _over_budget(url: str, budget: int, run_id: int, rows: int, report: WatchRun, *, spent: bool) -> bool:
    """When the window's budget places are all taken (or a call was refused by it): mark its unjudged rows
    skipped with the reason, count the window judged, and say so."""
    with connect(url) as conn:
        if not spent and watches.bought(conn, run_id) < budget:
            return False
        report.over_budget += watches.skip_over_budget(conn, run_id, budget)
        watches.judged(conn, run_id, rows)
        conn.commit()
    return True


def expire(url: str, name: str) -> list[str]:
    """Delete the windows older than the watch's `keep` (their datasets and runs), in one transaction."""
    with connect(url) as conn:
        gone = watches.expire(conn, watches.get(conn, name))
        conn.commit()
    return gone


def names_to_run(url: str, names: Sequence[str]) -> list[str]:
    """The watches `watch run` works on: those named, else every one."""
    with connect(url) as conn:
        if names:
            return [watches.get(conn, n).name for n in names]
        return [r["name"] for r in watches.list_watches(conn)]


_RELISTEN = 2.0  # seconds between attempts to listen again once the connection was lost (a server restarting)


class Wakeup:
    """The wait between `watch run --follow` passes: `interval` seconds, cut short by a NOTIFY on
    watches.CHANNEL (from a watch's trigger); a lost connection is reopened every few seconds meanwhile."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: psycopg.AsyncConnection | None = None

    async def __aenter__(self) -> Wakeup:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def _open(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
        with contextlib.suppress(psycopg.OperationalError, psycopg.InterfaceError):  # the database is down: sleep
            self.conn = await watches.listen(self.url)

    async def wait(self, seconds: float) -> None:
        """Return after `seconds`, or once a notification arrived (those that queued meanwhile are drained: one
        pass captures them all), or once listening again after the connection was lost (a notification sent
        while it was down is lost: the pass that follows captures what it announced)."""
        if self.conn is None or self.conn.closed or self.conn.broken:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            while (left := deadline - loop.time()) > 0:
                await asyncio.sleep(min(_RELISTEN, left))
                await self._open()
                if self.conn is not None:
                    return
            return
        try:
            async for _ in self.conn.notifies(timeout=seconds, stop_after=1):
                pass
            async for _ in self.conn.notifies(timeout=0):
                pass
        except (psycopg.OperationalError, psycopg.InterfaceError):
            await self.conn.close()
            self.conn = None
