"""`ragsql watch`: judge the rows a RAG application logs to a table of its own, where they are, in windows."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
from datetime import timedelta

import click

from ragsql import db
from ragsql.cli import error_line
from ragsql.cli.options import JUDGE_WORKERS, metrics_option, workers_option
from ragsql.cli.output import format_option, render, report
from ragsql.cli.specs import Float8
from ragsql.db import watches
from ragsql.errors import UsageError

__all__ = ["parse_duration", "watch_group"]

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _duration(ctx: click.Context, param: click.Parameter, text: str) -> timedelta:
    found = _DURATION.match(text)
    if found is None:
        raise click.BadParameter(f"{text!r} is no duration: write e.g. 30s, 5m, 2h or 1d")
    return timedelta(**{_UNITS[found[2]]: int(found[1])})


def parse_duration(option: str, text: str) -> timedelta:
    """A duration such as 30s, 5m, 2h or 7d; a UsageError naming the option otherwise."""
    found = _DURATION.match(text)
    if found is None:
        raise UsageError(f"{option} {text!r} is no duration: write e.g. 30s, 5m, 2h or 7d")
    return timedelta(**{_UNITS[found[2]]: int(found[1])})


@click.group("watch")
def watch_group() -> None:
    """Judge a production log table as rows arrive: sampled, in hourly or daily windows.

    A watch maps the columns of your application's own log table (or view): each
    sampled row is captured once, into the run of its window (NAME@<window start>,
    UTC), and judged by the same crash-safe queue as `ragsql judge`. Run
    `ragsql watch run --once` from cron; read ragsql.watch_metrics and
    ragsql.watch_lag in SQL.
    """


@watch_group.command("add")
@click.argument("name")
@click.option("--source", required=True, metavar="SCHEMA.TABLE", help="The log table or view (SELECT on it suffices).")
@click.option("--key", "key", required=True, metavar="COL", help="A column unique per row: a key is captured once.")
@click.option("--time", "time_", required=True, metavar="COL", help="When the row was logged (timestamptz).")
@click.option("--question", required=True, metavar="COL", help="The user's question (text).")
@click.option("--answer", required=True, metavar="COL", help="The application's answer (text).")
@click.option("--contexts", default=None, metavar="COL", help="The retrieved contexts: text[], a jsonb array or text.")
@click.option(
    "--retrieved",
    default=None,
    metavar="COL",
    help="The retrieved ids in rank order: text[], a jsonb array or text (stored as import's retrieved_context_ids).",
)
@click.option("--reference", default=None, metavar="COL", help="A reference answer (text), when the log has one.")
@click.option(
    "--sample",
    type=Float8(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    help="Fraction of rows judged, chosen by a hash of the key: the same rows on every replay.",
)
@click.option("--window", type=click.Choice(list(watches.WINDOWS)), default="1h", show_default=True)
@click.option(
    "--settle",
    default="5m",
    show_default=True,
    callback=_duration,
    help="A window counts as closed this long after its end; a view source re-reads rows this far back.",
)
@metrics_option("Space- or comma-separated metrics to judge (default: those `ragsql judge` judges).")
@click.option(
    "--judge",
    default=None,
    metavar="MODEL|offline",
    help="The judge: a model at the configured endpoint, or offline (default: the endpoint, else offline).",
)
@click.option("--backfill", is_flag=True, help="Also capture the rows logged before the watch was added.")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=None,
    metavar="CALLS_PER_WINDOW",
    help="The most judge calls bought per window; rows beyond it are kept as skipped, with the reason.",
)
@click.option(
    "--keep",
    default=None,
    metavar="DURATION",
    callback=lambda ctx, param, text: None if text is None else _duration(ctx, param, text),  # optional
    help="Delete the dataset and run of each window that started longer ago than this, e.g. 90d (default: keep all).",
)
@click.option(
    "--trigger",
    is_flag=True,
    help="Add an AFTER INSERT trigger to the source table that wakes `watch run --follow` (needs TRIGGER on it).",
)
@format_option()
def add_command(
    name: str,
    source: str,
    key: str,
    time_: str,
    question: str,
    answer: str,
    contexts: str | None,
    retrieved: str | None,
    reference: str | None,
    sample: float,
    window: str,
    settle: timedelta,
    metrics: list[str] | None,
    judge: str | None,
    backfill: bool,
    budget: int | None,
    keep: timedelta | None,
    trigger: bool,
    fmt: str,
) -> None:
    """Add a watch NAME of a log table; its columns are checked now, and nothing is stored if one is wrong."""
    columns = watches.Columns(key, time_, question, answer, contexts, reference, retrieved)
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction():
            watch = watches.add(
                conn,
                name,
                source,
                columns,
                sample=sample,
                window=window,
                settle=settle,
                metrics=metrics,
                judge=judge,
                backfill=backfill,
                budget=budget,
                keep=keep,
                trigger=trigger,
            )
    if fmt == "json":
        report({"watch": watch.name, "source": watch.source, "added": True})
        return
    click.echo(
        f"added watch {watch.name} of {watch.source}: run `ragsql watch run {watch.name} --once` (e.g. from cron)"
    )


@watch_group.command("list")
@format_option(["table", "json", "csv"])
def list_command(fmt: str) -> None:
    """Every watch: its source, sample, window, state and how many rows it captured and judged."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        rows = watches.list_watches(conn)
    columns = ["name", "source", "sample", "window", "budget", "state", "windows", "captured", "judged", "last_capture"]
    render(rows, columns, fmt, title=f"{len(rows)} watch{'' if len(rows) == 1 else 'es'}")


@watch_group.command("show")
@click.argument("name")
@format_option(["table", "json"])
def show_command(name: str, fmt: str) -> None:
    """One watch: its column mapping and settings, then each window with its run and counts."""
    with db.connect() as conn:
        db.ensure_schema(conn)
        watch = watches.get(conn, name)
        rows = watches.windows(conn, watch.id)
        trigger = watches.trigger_of(conn, watch)
    settings = {
        "watch": watch.name,
        "source": watch.source,
        "columns": {k: v for k, v in vars(watch.columns).items() if v is not None},
        "sample": watch.sample,
        "window": "1d" if watch.window_size == watches.WINDOWS["1d"] else "1h",
        "settle_seconds": int(watch.settle.total_seconds()),
        "metrics": watch.metrics,
        "judge": watch.judge,
        "budget": watch.budget,
        "keep_seconds": None if watch.keep is None else int(watch.keep.total_seconds()),
        "state": "paused" if watch.paused else "active",
        "trigger": trigger,
        "starts_at": watch.starts_at,
        "last_capture": watch.captured_until,
    }
    if fmt == "json":
        report({**settings, "windows": rows})
        return
    render([{"setting": k, "value": v} for k, v in settings.items()], ["setting", "value"], "table", title=watch.name)
    render(
        rows,
        ["window_start", "run", "captured", "skipped", "judged", "over_budget", "closed"],
        "table",
        title="windows",
    )


def _state_command(verb: str, paused: bool) -> click.Command:
    @click.command(
        verb,
        help=f"{verb.capitalize()} watch NAME: "
        + ("it captures and judges nothing until resumed." if paused else "its next run catches up."),
    )
    @click.argument("name")
    def command(name: str) -> None:
        with db.connect() as conn:
            db.ensure_schema(conn)
            with conn.transaction():
                watches.set_paused(conn, name, paused)
        click.echo(f"{'paused' if paused else 'resumed'} watch {name}")

    return command


watch_group.add_command(_state_command("pause", True))
watch_group.add_command(_state_command("resume", False))


@watch_group.command("drop")
@click.argument("name")
@click.option("--with-runs", is_flag=True, help="Also delete its windows' datasets and runs, with their verdicts.")
@click.option("--yes", is_flag=True, help="Really drop it (nothing is dropped without it).")
def drop_command(name: str, with_runs: bool, yes: bool) -> None:
    """Drop watch NAME; its windows' datasets and runs stay (scores, compare) unless --with-runs."""
    if not yes:
        raise UsageError(f"watch drop {name}: add --yes to drop it" + (" and its runs" if with_runs else ""))
    with db.connect() as conn:
        db.ensure_schema(conn)
        with conn.transaction():
            count = watches.drop(conn, name, with_runs)
    click.echo(
        f"dropped watch {name}" + (f" and its {count} windows' runs" if with_runs else f" ({count} windows kept)")
    )


@watch_group.command("run")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--once", is_flag=True, help="Capture the new rows, judge them, and exit (for cron or a CronJob).")
@click.option(
    "--follow",
    is_flag=True,
    help="Run as a service: capture and judge, wait --interval, again; SIGTERM stops it (exit 143), Ctrl-C too (130).",
)
@click.option(
    "--interval",
    default="30s",
    metavar="DURATION",
    show_default=True,
    callback=_duration,
    help="How long --follow waits between polls (a NOTIFY from a watch's trigger wakes it sooner).",
)
@workers_option(JUDGE_WORKERS, "Concurrent judge workers in this process (other processes may run at once).")
@format_option()
def run_command(names: tuple[str, ...], once: bool, follow: bool, interval: timedelta, workers: int, fmt: str) -> int:
    """Capture each watch's new rows (every active watch by default) and judge its windows.

    Exit status 3: some judge tasks failed (their metrics are NULL with the reason; the
    next run retries them). With --follow, one line (one JSON object with --format json)
    per watch and poll that captured, judged or expired something.
    """
    from ragsql.orchestrator import watch as orchestrator

    if once == follow:
        raise UsageError("watch run: pass --once (one pass, e.g. from cron) or --follow (a service that polls)")
    if interval < timedelta(seconds=1):
        raise UsageError("watch run: --interval must be at least 1s")
    url = db.database_url()
    with db.connect() as conn:
        db.ensure_schema(conn)
    if follow:
        try:
            asyncio.run(_follow(url, names, workers, interval, fmt))
        except asyncio.CancelledError:  # SIGTERM: the tasks in progress were put back before this point
            click.echo(_STOPPED, err=True)
            return 143
        return 0  # not reached: only a signal or an error ends --follow
    reports, failures = [], []
    chosen = orchestrator.names_to_run(url, names)
    for name in chosen:
        try:
            done = _run_one(url, name, workers)
        except asyncio.CancelledError:  # SIGTERM: the tasks in progress were put back before this point
            click.echo(_STOPPED, err=True)
            return 143
        except Exception as exc:
            # one broken watch (a dropped column, a lost grant) leaves the others to run; alone, it is the error
            line = error_line(exc)
            if len(chosen) == 1 or line is None:
                raise
            failures.append(_failure(name, line))
            continue
        reports.append(done)
    rows = [_row(r) for r in reports]
    if fmt == "json":
        report({"watches": rows})
    else:
        render(rows, list(rows[0]) if rows else ["watch"], "table", title="watch run")
    _say_problems(reports, failures)
    return 1 if failures else 3 if any(r.failed for r in reports) else 0


_STOPPED = "ragsql: stopped by SIGTERM; unfinished tasks were put back to pending"


def _failure(name: str, line: str) -> str:
    return f"ragsql: error: {line if line.startswith(f'watch {name}: ') else f'watch {name}: {line}'}"


def _row(r) -> dict:
    """What `watch run` reports of one watch's pass."""
    return {
        "watch": r.watch,
        "state": "paused" if r.paused else "active",
        "captured": r.captured.rows,
        "skipped": r.captured.skipped,
        "windows": len(r.captured.windows),
        "judged_runs": len(r.judged_runs),
        "tasks_done": r.done,
        "tasks_failed": r.failed,
        "over_budget": r.over_budget,
        "expired": len(r.expired),
    }


def _say_problems(reports: list, failures: list[str]) -> None:
    """The failed tasks, the skipped metrics and the broken watches of a pass, on stderr."""
    for r in reports:
        for qid, kind, error in r.errors[:10]:
            click.echo(f"failed: watch {r.watch}, row {qid}, {kind}: {error}", err=True)
    for r in reports:
        for metric, why in r.skipped.items():
            click.echo(f"skipped {metric} in watch {r.watch}: {why}", err=True)
    for line in failures:
        click.echo(line, err=True)


async def _follow(url: str, names: tuple[str, ...], workers: int, interval: timedelta, fmt: str) -> None:
    """`watch run --follow`: a pass over the watches, then a wait of `interval` (cut short by a NOTIFY on
    ragsql_watch), for ever; a watch that fails is one error line per pass and the others go on."""
    from ragsql.orchestrator import watch as orchestrator

    _stop_on_sigterm()
    chosen = orchestrator.names_to_run(url, names)  # an unknown name is the error, before any work
    async with orchestrator.Wakeup(url) as wakeup:
        while True:
            reports, failures = [], []
            for name in chosen:
                try:
                    reports.append(await _pass(url, name, workers))
                except Exception as exc:
                    if (line := error_line(exc)) is None:
                        raise
                    failures.append(_failure(name, line))
            busy = [r for r in reports if r.captured.rows or r.captured.skipped or r.judged_runs or r.expired]
            for r in busy:
                row = _row(r)
                if fmt == "json":
                    click.echo(json.dumps(row))
                else:
                    click.echo(" ".join(f"{k}={v}" for k, v in row.items() if k != "state"))
            _say_problems(reports, failures)
            await wakeup.wait(interval.total_seconds())
            try:
                chosen = orchestrator.names_to_run(url, names)  # watches added since are followed too
            except Exception as exc:
                if (line := error_line(exc)) is None:
                    raise
                click.echo(f"ragsql: error: {line}", err=True)


def _run_one(url: str, name: str, workers: int):
    """Capture one watch's new rows and judge its windows (nothing for a paused watch)."""
    return asyncio.run(_pass(url, name, workers))


async def _pass(url: str, name: str, workers: int):
    """One pass over one watch: capture, expire, judge (nothing for a paused watch)."""
    from ragsql.orchestrator import watch as orchestrator

    done = orchestrator.WatchRun(name)
    with db.connect() as conn:
        watch = watches.get(conn, name)
    if watch.paused:
        done.paused = True
        return done
    _stop_on_sigterm()
    done.captured = orchestrator.capture(url, name)  # one transaction: a signal is acted on once it committed
    # after the capture, before judging: a window captured already older than --keep buys no call
    done.expired = orchestrator.expire(url, name)
    await _judge(url, watch, done, workers)
    return done


def _stop_on_sigterm() -> None:
    """SIGTERM cancels the running task, as Ctrl-C does (asyncio.run turns that into KeyboardInterrupt)."""
    with contextlib.suppress(NotImplementedError, RuntimeError):
        if (task := asyncio.current_task()) is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def _judge(url: str, watch: watches.Watch, done, workers: int) -> None:
    from ragsql.orchestrator import watch as orchestrator

    judging = orchestrator.make_watch_judging(watch.judge)
    try:
        await orchestrator.judge_windows(url, watch, judging, done, workers)
    finally:
        await judging.judge.aclose()
        await judging.embedder.aclose()
