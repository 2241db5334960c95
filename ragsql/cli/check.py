"""`ragsql check`: quality gates for scheduled jobs and CI (exit 4 when one fails)."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import click
import psycopg

from ragsql import db
from ragsql.cli.options import judge_option, rel_level_option, resampling_options
from ragsql.cli.output import format_option, render, report
from ragsql.cli.specs import OutputFile, finite, split_names
from ragsql.db import gates, names, watches
from ragsql.db.compare import Resampling
from ragsql.errors import GateFailed, InputError, UsageError
from ragsql.formats.junit import Case, write_junit

__all__ = ["check_command", "parse_gates"]

_GATE = re.compile(r"^(?P<measure>(?:[^=\s()]|\([^()]*\))+)=(?P<limit>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


def parse_gates(option: str, values: tuple[str, ...]) -> list[tuple[str, float]]:
    """`nDCG@10=0.4` items (space- or comma-separated, the option repeatable) as (measure, limit) pairs: every
    one given, a measure gated twice checked twice (a dict would keep only the last)."""
    limits: list[tuple[str, float]] = []
    for value in values:
        for item in split_names(value) or []:
            match = _GATE.match(item)
            if match is None:
                raise UsageError(f'{option} "{item}": expected MEASURE=NUMBER, e.g. {option} "nDCG@10=0.4"')
            try:
                limits.append((match["measure"], finite(match["limit"])))
            except ValueError as exc:
                raise UsageError(f'{option} "{item}": {exc}') from None
    return limits


def _line(result: gates.GateResult) -> str:
    return result.reason or f"{result.measure} {result.gate} {result.limit_value}: holds"


@click.command("check")
@click.option("--run", "run", default=None, help="The run to check.")
@click.option(
    "--watch",
    "watch",
    default=None,
    metavar="NAME",
    help="Check a watch's window instead of a run: its --max-drop gates against the windows of --baseline DURATION.",
)
@click.option(
    "--window",
    type=click.Choice(["latest"]),
    default="latest",
    show_default=True,
    help="With --watch: the window checked (its latest closed one).",
)
@click.option(
    "--baseline",
    default=None,
    help="A run of the same dataset to compare with (for --max-drop); with --watch, a duration (e.g. 7d): the "
    "windows that started that long before the checked one, pooled.",
)
@click.option(
    "--min",
    "minimums",
    multiple=True,
    metavar='"MEASURE=VALUE ..."',
    help='The run value must be at least VALUE, e.g. --min "nDCG@10=0.4 faithfulness=0.8".',
)
@click.option(
    "--max",
    "maximums",
    multiple=True,
    metavar='"MEASURE=VALUE ..."',
    help='The run value must be at most VALUE, e.g. --max "contradiction_rate=0.05".',
)
@click.option(
    "--max-drop",
    "max_drops",
    multiple=True,
    metavar='"MEASURE=VALUE ..."',
    help="The change from --baseline in the metric's bad direction must be at most VALUE.",
)
@click.option(
    "--significant",
    is_flag=True,
    help="Count a drop only when it is significant (Holm-adjusted randomization p < alpha).",
)
@resampling_options
@rel_level_option()
@judge_option()
@click.option(
    "--junit",
    "junit",
    type=OutputFile(),
    default=None,
    help="Also write a JUnit XML report (one test case per gate) for a CI system to display.",
)
@format_option()
def check_command(
    run: str | None,
    watch: str | None,
    window: str,
    baseline: str | None,
    minimums: tuple[str, ...],
    maximums: tuple[str, ...],
    max_drops: tuple[str, ...],
    significant: bool,
    resamples: int,
    seed: float,
    alpha: float,
    rel_level: int,
    judge: str | None,
    junit: Path | None,
    fmt: str,
) -> None:
    """Check a run against quality gates; exit 0 when every gate holds, 4 when any fails.

    Each failed gate is one line on stderr: the measure, its value, the limit and, against
    a baseline, the change with its interval and p-value. A metric with no value fails its
    gate, never compared as 0. For a nightly job:

      ragsql check --run nightly --baseline release --min "nDCG@10=0.4" --max-drop "faithfulness=0.05" --significant

    A watch's latest closed window against its last week of windows (ragsql watch):

      ragsql check --watch support --window latest --baseline 7d --max-drop "faithfulness=0.05" --significant
    """
    if (run is None) == (watch is None):
        raise UsageError("name what to check: --run RUN or --watch NAME (one of them)")
    limits = {
        "min": parse_gates("--min", minimums),
        "max": parse_gates("--max", maximums),
        "max_drop": parse_gates("--max-drop", max_drops),
    }
    if not any(limits.values()):
        raise UsageError("no gate given: use --min, --max or --max-drop")
    if limits["max_drop"] and baseline is None:
        raise UsageError("--max-drop needs --baseline")
    if watch is not None:
        _check_watch(watch, window, baseline, limits, significant, alpha, judge, fmt)
        return
    assert run is not None
    started = time.perf_counter()
    with db.connect() as conn:
        db.ensure_schema(conn)
        for name in (run, baseline):
            if name is not None:
                names.run_id(conn, name)
        try:
            results = gates.check(
                conn,
                run,
                baseline,
                limits["min"],
                limits["max"],
                limits["max_drop"],
                significant,
                Resampling(resamples, seed, alpha),
                rel_level,
                judge,
            )
        except psycopg.errors.InvalidParameterValue as exc:
            message = exc.diag.message_primary or str(exc)
            if "different datasets" in message:
                raise InputError(message) from None
            hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
            raise UsageError(f"gate: {message}{hint}") from None
    if junit is not None:
        write_junit(
            junit,
            f"ragsql check {run}",
            [Case(f"{r.gate} {r.measure}", None if r.passed else _line(r), _line(r)) for r in results],
            time.perf_counter() - started,
        )
    _show(
        results,
        fmt,
        {"run": run, "baseline": baseline},
        f"gates of run {run}" + (f" against {baseline}" if baseline else ""),
        f"run {run}",
    )


def _show(results: list[gates.GateResult], fmt: str, head: dict, title: str, what: str) -> None:
    """The gates as JSON (`head` first) or a table, each failed one as a line on stderr; GateFailed if one failed."""
    failed = [r for r in results if not r.passed]
    if fmt == "json":
        report({**head, "passed": not failed, "gates": [dataclasses.asdict(r) for r in results]})
    else:
        render(
            [{**dataclasses.asdict(r), "result": "pass" if r.passed else "FAIL"} for r in results],
            ["gate", "measure", "value", "limit_value", "baseline_value", "diff", "p_adjusted", "result"],
            "table",
            title=title,
        )
    if failed:
        for r in failed:
            click.echo(f"ragsql: gate failed: {_line(r)}", err=True)
        raise GateFailed(f"{len(failed)} of {len(results)} gates failed for {what}")


def _check_watch(
    watch: str,
    window: str,
    baseline: str | None,
    limits: dict[str, list[tuple[str, float]]],
    significant: bool,
    alpha: float,
    judge: str | None,
    fmt: str,
) -> None:
    """`check --watch`: the max-drop gates of the watch's latest closed window (ragsql.check_watch); exit 4 on a
    failed gate, one error line when there is no closed window or no baseline window."""
    from ragsql.cli.watch import parse_duration

    if limits["min"] or limits["max"] or not limits["max_drop"]:
        raise UsageError("check --watch: give --max-drop gates (and --baseline DURATION); --min and --max need --run")
    period = parse_duration("--baseline", baseline or "")
    with db.connect() as conn:
        db.ensure_schema(conn)
        watches.get(conn, watch)
        try:
            results = gates.check_watch(conn, watch, period, limits["max_drop"], significant, alpha, judge)
        except psycopg.errors.NoDataFound as exc:
            raise InputError(exc.diag.message_primary or str(exc)) from None
        except psycopg.errors.InvalidParameterValue as exc:
            raise UsageError(f"gate: {exc.diag.message_primary or exc}") from None
    _show(
        results,
        fmt,
        {"watch": watch, "window": window},
        f"gates of watch {watch}, {window} window, against the {baseline} before it",
        f"watch {watch}",
    )
