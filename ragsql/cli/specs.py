"""Checks of option values the CLI can make before touching data, so a wrong one is a usage error (exit 2)."""

from __future__ import annotations

import re
from collections.abc import Callable

import click

__all__ = ["check_metrics", "check_spec", "split_names"]

_NAME = re.compile(r"(?:[^\s,()]|\([^()]*\))+")


def split_names(value: str | None) -> list[str] | None:
    """'P@5, nDCG@10 RBP(rel=2,p=0.5)' -> ['P@5', 'nDCG@10', 'RBP(rel=2,p=0.5)']: names separated by spaces or
    commas, a comma inside a measure's parentheses kept; None for no value."""
    return _NAME.findall(value) or None if value else None


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
    (factual_correctness(mode=recall), rubrics_score:cited), asks for its judge task; an unknown metric name is a
    usage error."""
    if not value:
        return None
    from ragsql.orchestrator.runner import METRICS

    asked = list(dict.fromkeys(m if m in METRICS or _VARIANT.sub("", m) not in METRICS else _VARIANT.sub("", m)
                               for m in split_names(value) or []))
    wrong = [m for m in asked if m not in METRICS]
    if wrong:
        raise click.BadParameter(f"unknown metric {wrong[0]!r}; choose from {', '.join(METRICS)}")
    return asked
