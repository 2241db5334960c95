"""Checks of option values the CLI can make before touching data, so a wrong one is a usage error (exit 2)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import click

from ragsql import registry
from ragsql.errors import UsageError

__all__ = [
    "INT4_MAX",
    "INT4_MIN",
    "Float8",
    "OutputFile",
    "check_metrics",
    "check_spec",
    "finite",
    "int4",
    "metric_names",
    "split_names",
]

INT4_MIN, INT4_MAX = -(2**31), 2**31 - 1  # PostgreSQL integer: an option passed to SQL as one stays within it


def finite(text: str) -> float:
    """A number as float8 takes it; ValueError for text that is no number or no finite one (nan, inf, 1e400)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


class Float8(click.FloatRange):
    """A float option passed to SQL as float8: a finite number (not nan, inf or 1e400), within the range if given."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.min is None and self.max is None:
            self.name = "float"  # help shows FLOAT, not FLOAT RANGE x<=None

    def _describe_range(self) -> str:
        return "finite" if self.min is None and self.max is None else super()._describe_range()

    def convert(self, value, param, ctx):
        try:
            number = finite(value if isinstance(value, str) else repr(float(value)))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return super().convert(number, param, ctx)


class _Int4(click.IntRange):
    """click.IntRange whose help shows only the bounds given, not PostgreSQL's."""

    min: int  # always set: PostgreSQL's bounds where none is given
    max: int

    def __init__(self, low: int | None, high: int | None) -> None:
        super().__init__(
            INT4_MIN if low is None else max(low, INT4_MIN), INT4_MAX if high is None else min(high, INT4_MAX)
        )
        self._given = (low, high)
        if self._given == (None, None):
            self.name = "integer"

    def _describe_range(self) -> str:
        low, high = self._given
        if low is None and high is None:
            return ""
        return f"x>={low}" if high is None else f"x<={high}" if low is None else f"{low}<=x<={high}"

    def convert(self, value, param, ctx):
        number = click.INT.convert(value, param, ctx)
        if not INT4_MIN <= number <= INT4_MAX:
            self.fail(f"{number} is beyond PostgreSQL's integer ({INT4_MIN} to {INT4_MAX})", param, ctx)
        if not self.min <= number <= self.max:
            self.fail(f"{number} is not in the range {self._describe_range()}", param, ctx)
        return number


def int4(low: int | None = None, high: int | None = None) -> click.IntRange:
    """An integer option passed to SQL as integer: within [low, high], never beyond PostgreSQL's integer."""
    return _Int4(low, high)


_NAME = re.compile(r"(?:[^\s,()]|\([^()]*\))+")


def split_names(value: str | None) -> list[str] | None:
    """'P@5, nDCG@10 RBP(rel=2,p=0.5)' -> ['P@5', 'nDCG@10', 'RBP(rel=2,p=0.5)']: names separated by spaces or
    commas, a comma inside a measure's parentheses kept; None for no value."""
    return _NAME.findall(value) or None if value else None


def metric_names(value: str | None) -> list[str] | None:
    """split_names, a metric named as RAGAS or DeepEval name it (Faithfulness, ContextualRecallMetric) given as
    ragsql names it."""
    try:
        return [registry.resolve(n) for n in split_names(value) or []] or None
    except ValueError as exc:  # a family named without its member (AspectCritic)
        raise UsageError(str(exc)) from None


def _kinds(specs: tuple[str, ...]) -> set[str]:
    """'offline[:dim]', 'cross-encoder:<model>' -> {'offline', 'cross-encoder'}."""
    return {s.split(":")[0].split("[")[0] for s in specs}


def check_spec(what: str) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A callback that rejects an --embedder or --rerank value whose kind is unknown."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is None:
            return None
        if what == "embedder":
            from ragsql.embed.spec import SPECS
        else:
            from ragsql.rerank.spec import SPECS
        if value.strip().partition(":")[0].lower() not in _kinds(SPECS):
            raise click.BadParameter(f"unknown {what} {value!r}: use one of {', '.join(SPECS)}")
        return value

    return callback


_VARIANT = re.compile(r"\(mode=\w+\)$|:[a-z][a-z0-9_]*$")


def check_metrics(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    """'faithfulness, answer_relevancy' -> the list; a metric of a family, as scores names it
    (factual_correctness(mode=recall), rubrics_score:cited), or as RAGAS or DeepEval name it, asks for its judge
    task; an unknown metric name is a usage error."""
    if not value:
        return None
    from ragsql.orchestrator.runner import METRICS

    try:
        named = metric_names(value) or []
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None
    asked = list(
        dict.fromkeys(m if m in METRICS or _VARIANT.sub("", m) not in METRICS else _VARIANT.sub("", m) for m in named)
    )
    wrong = [m for m in asked if m not in METRICS]
    if wrong:
        raise click.BadParameter(f"unknown metric {wrong[0]!r}; choose from {', '.join(METRICS)}")
    return asked


class OutputFile(click.Path):
    """A file an option writes: its folder must exist (a usage error naming the folder, before any work)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False, writable=True, path_type=Path)

    def convert(self, value, param, ctx):
        path = super().convert(value, param, ctx)
        folder = Path(os.fsdecode(path)).expanduser().absolute().parent
        if not folder.is_dir():
            self.fail(
                f"folder {str(folder)!r} does not exist" if not folder.exists() else f"{str(folder)!r} is not a folder",
                param,
                ctx,
            )
        return path
