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
from ragsql.db import gates, names
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
@click.option("--run", "run", required=True, help="The run to check.")
@click.option("--baseline", default=None, help="A run of the same dataset to compare with (for --max-drop).")
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
    run: str,
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
    """
    limits = {
        "min": parse_gates("--min", minimums),
        "max": parse_gates("--max", maximums),
        "max_drop": parse_gates("--max-drop", max_drops),
    }
    if not any(limits.values()):
        raise UsageError("no gate given: use --min, --max or --max-drop")
    if limits["max_drop"] and baseline is None:
        raise UsageError("--max-drop needs --baseline")
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
    failed = [r for r in results if not r.passed]
    if junit is not None:
        write_junit(
            junit,
            f"ragsql check {run}",
            [Case(f"{r.gate} {r.measure}", None if r.passed else _line(r), _line(r)) for r in results],
            time.perf_counter() - started,
        )
    if fmt == "json":
        report(
            {"run": run, "baseline": baseline, "passed": not failed, "gates": [dataclasses.asdict(r) for r in results]}
        )
    else:
        render(
            [{**dataclasses.asdict(r), "result": "pass" if r.passed else "FAIL"} for r in results],
            ["gate", "measure", "value", "limit_value", "baseline_value", "diff", "p_adjusted", "result"],
            "table",
            title=f"gates of run {run}" + (f" against {baseline}" if baseline else ""),
        )
    if failed:
        for r in failed:
            click.echo(f"ragsql: gate failed: {_line(r)}", err=True)
        raise GateFailed(f"{len(failed)} of {len(results)} gates failed for run {run}")
