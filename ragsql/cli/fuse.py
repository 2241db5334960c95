"""`ragsql fuse`: several runs of one dataset fused into a new run, as ranx's fuse computes it."""

from __future__ import annotations

import click

from ragsql import db
from ragsql.cli.options import RRF_K, deprecated_alias
from ragsql.cli.output import format_option, report, warn
from ragsql.cli.specs import Float8, finite, int4, split_names
from ragsql.db import fusion, names as known
from ragsql.errors import UsageError

__all__ = ["fuse_command"]

METHODS = ("rrf", "combsum", "combmnz", "combanz", "combmax", "combmin", "wsum", "isr", "log_isr", "bordafuse")
NORMS = ("min-max", "max", "sum", "zmuv", "rank", "none")


@click.command("fuse")
@click.option("--runs", "runs", required=True, metavar="A,B[,C]", help="The runs to fuse (two or more, one dataset).")
@click.option(
    "--method",
    type=click.Choice(METHODS, case_sensitive=False),
    default="rrf",
    show_default=True,
    help="How: reciprocal rank (rrf), sum / sum x count / mean / max / min of the normalised scores "
    "(combsum, combmnz, combanz, combmax, combmin), weighted sum (wsum), inverse square rank (isr, "
    "log_isr) or Borda count (bordafuse).",
)
@click.option(
    "--norm",
    type=click.Choice(NORMS, case_sensitive=False),
    default="min-max",
    show_default=True,
    help="Each run's scores per query first: (s-min)/(max-min), s/max, (s-min)/(sum-min*n), "
    "z-score, 1-(rank-1)/n, or none (ranx's default is min-max).",
)
@click.option(
    "--weights",
    default=None,
    metavar="RUN=W,RUN=W",
    help="wsum only: the weight of each run of --runs, e.g. bm25=0.7,vector=0.3 (the form of retrieve --weights).",
)
@click.option("--rrf-k", "k", default=RRF_K, show_default=True, type=int4(0), help="rrf's constant.")
@deprecated_alias("--k", "--rrf-k", "k", type=int4(0))
@click.option(
    "--optimize",
    is_flag=True,
    help="wsum / rrf: pick the weights (a grid of --step) or k (10..100) that maximise --measure on the "
    "dataset's judgments, as ranx's optimize_fusion does; tuned on the very queries it is scored on.",
)
@click.option("--measure", default="nDCG@10", show_default=True, help="What --optimize maximises.")
@click.option(
    "--step", default=0.1, show_default=True, type=Float8(0.01, 0.5), help="--optimize wsum: the weight grid's step."
)
@click.option("--run", "run", required=True, help="Name of the fused run to store.")
@format_option()
def fuse_command(
    runs: str,
    method: str,
    norm: str,
    weights: str | None,
    k: int,
    optimize: bool,
    measure: str,
    step: float,
    run: str,
    fmt: str,
) -> None:
    """Fuse runs of one dataset into a new run, as ranx's fuse(runs, norm, method) computes it.

    Scores per query and document equal ranx's; equal fused scores are ranked by document id
    (descending, as trec_eval orders ties). The new run records how it was made (ragsql show
    run NAME) and is evaluated, compared and checked like any other. In SQL:
    select ragsql.fuse('hybrid-rrf', array['bm25', 'vector'], 'rrf').
    """
    names = split_names(runs) or []
    if len(names) < 2:
        raise UsageError("--runs: name two runs or more, e.g. --runs bm25,vector")
    parsed = None if weights is None else _weights(weights, names)
    if optimize and method.lower() not in ("wsum", "rrf"):
        raise UsageError(f"--optimize tunes wsum's weights or rrf's k, not {method}")
    if optimize and (parsed is not None or k != RRF_K):
        raise UsageError("--optimize picks the weights or k itself: drop --weights / --rrf-k")
    tuned, warnings = None, []
    with db.connect() as conn:
        db.ensure_schema(conn)
        for name in names:  # an unknown run: the message every command gives
            known.run_id(conn, name)
        if optimize:
            best, trials = fusion.optimize(conn, names, method.lower(), norm, measure, step)
            parsed, k = best["weights"], best["k"]
            tuned = {
                "measure": measure,
                "trials": len(trials),
                "best": max(t["score"] for t in trials if t["score"] is not None),
            }
            warnings.append(
                f"the {'weights' if method.lower() == 'wsum' else 'k'} were tuned for {measure} on this "
                "dataset's own judgments: its scores here are optimistic; judge it on other queries"
            )
        run_id, queries, results = fusion.fuse(conn, run, names, method, norm, parsed, k)
    if fmt == "json":
        report(
            {
                "run": run,
                "runs": names,
                "method": method,
                "norm": norm,
                "weights": parsed,
                "k": k,
                "optimized": tuned,
                "queries": queries,
                "results": results,
            },
            warnings,
        )
        return
    chosen = f", weights {parsed}" if parsed else f", k {k}" if method.lower() == "rrf" else ""
    click.echo(
        f"run {run}: {method} of {', '.join(names)} ({norm} scores{chosen}): {queries} queries, "
        f"{results} results" + (f"; {measure} {tuned['best']:.4f} over {tuned['trials']} trials" if tuned else "")
    )
    for line in warnings:
        warn(line)


def _weights(value: str, runs: list[str]) -> list[float]:
    """'bm25=0.7,vector=0.3' -> the weights in --runs order (a run not named weighs 1); the old form, one weight
    per run in --runs order ('0.7,0.3'), still works with a note."""
    parts = split_names(value) or []
    example = ",".join(f"{run}={w}" for run, w in zip(runs, ("0.7", "0.3", "0.5")))
    try:
        if parts and all("=" not in p for p in parts):
            listed = [finite(p) for p in parts]
            if len(listed) == len(runs):  # else the count is an error of its own: one line, and no note before it
                click.echo(f"ragsql: note: fuse --weights {value} is deprecated: use --weights {example}", err=True)
            return listed
        named = {}
        for part in parts:
            run, sep, number = part.partition("=")
            if not sep or run not in runs:
                raise ValueError(f"{part!r} is not RUN=NUMBER with RUN one of --runs ({', '.join(runs)})")
            named[run] = finite(number)
    except ValueError as exc:
        raise UsageError(f'--weights "{value}": {exc} (e.g. --weights {example})') from None
    return [named.get(run, 1.0) for run in runs]
