"""The options several commands share, each declared once so that its name, type, default and help agree."""

from __future__ import annotations

from collections.abc import Callable

import click

from ragsql.cli.specs import Float8, check_metrics, check_spec, int4

__all__ = [
    "DEPTH",
    "GENERATE_WORKERS",
    "JUDGE_WORKERS",
    "RRF_K",
    "TOP_N",
    "deprecated_alias",
    "depth_option",
    "judge_option",
    "judging_options",
    "measures_option",
    "metrics_option",
    "model_option",
    "rel_level_option",
    "resampling_options",
    "spec_option",
    "top_n_option",
    "workers_option",
]

Decorator = Callable[[Callable], Callable]

# Defaults `ragsql demo` shares with the commands it stands for, so that its runs are what they would make
RRF_K = 60  # the constant of Reciprocal Rank Fusion (Cormack et al.'s 60): retrieve, fuse
DEPTH = 20  # results per query: retrieve --k
TOP_N = 5  # results given to the generator as contexts: generate --top-n
GENERATE_WORKERS = 8  # generate --workers
JUDGE_WORKERS = 16  # judge --workers, judge-check --workers


def deprecated_alias(old: str, new: str, name: str, **kwargs) -> Decorator:
    """A hidden old spelling `old` of option `new` (parameter `name`): it still works, so scripts and examples do
    not break, and prints one note on stderr saying what to write instead."""

    def note(ctx: click.Context, param: click.Parameter, value):
        if value is None or value == ():  # not given: the alias has no default of its own
            return value
        click.echo(f"ragsql: note: {ctx.command_path.removeprefix('ragsql ')} {old} is deprecated: use {new}", err=True)
        ctx.params[name] = value  # a value set here is kept: the new spelling's default does not override it
        ctx.set_parameter_source(name, click.core.ParameterSource.COMMANDLINE)
        return value

    # a slot of its own: options sharing one are not told apart by the parser
    alias = "deprecated_" + old.lstrip("-").replace("-", "_")
    return click.option(old, alias, hidden=True, expose_value=False, callback=note, **kwargs)


def _stacked(*options: Decorator) -> Decorator:
    """One decorator applying `options` as if written above a command in this order."""

    def apply(command: Callable) -> Callable:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def measures_option(what: str = "measures to compare") -> Decorator:
    """--measures of compare and history: retrieval measures and generation metrics by any spelling."""
    return click.option(
        "--measures",
        default=None,
        metavar='"nDCG@10 AP faithfulness ..."',
        help=f"Space- or comma-separated {what}: retrieval measures (ir_measures, trec_eval or ranx names: "
        "nDCG@10, ndcg_cut_10, MRR, MAP, hit_rate@5) and generation metrics (faithfulness, aspect:<name>). "
        "Default: the default measures and every metric the runs were judged on.",
    )


def metrics_option(help: str) -> Decorator:
    """--metrics of the commands that judge: generation metrics, each name checked against the registry."""
    return click.option(
        "--metrics", default=None, metavar='"faithfulness answer_relevancy ..."', callback=check_metrics, help=help
    )


def spec_option(what: str, help: str, metavar: str = "SPEC") -> Decorator:
    """--embedder or --rerank: a model spec whose kind is checked before any data is touched."""
    return click.option(f"--{what}", default=None, metavar=metavar, callback=check_spec(what), help=help)


resampling_options = _stacked(
    click.option(
        "--resamples",
        type=click.IntRange(min=1, max=1_000_000),
        default=10000,
        show_default=True,
        help="Resamples of the bootstrap interval and of the randomization test.",
    ),
    click.option(
        "--seed",
        type=Float8(),
        default=0.42,
        show_default=True,
        help="Seed of the resampling: the same seed gives the same numbers.",
    ),
    click.option(
        "--alpha",
        type=Float8(0, 1, min_open=True, max_open=True),
        default=0.05,
        show_default=True,
        help="Significance level; intervals are (1 - alpha).",
    ),
)
"""--resamples, --seed, --alpha: the same settings give the same intervals and p-values."""


def rel_level_option() -> Decorator:
    """--rel-level: the minimum grade that counts as relevant, as trec_eval -l."""
    return click.option(
        "--rel-level",
        default=1,
        show_default=True,
        type=int4(),
        help="Minimum grade that counts as relevant (trec_eval -l). nDCG gains ignore it.",
    )


def judge_option(what: str = "generation metrics read") -> Decorator:
    """--judge: whose verdicts a command reads (db.generation's `judge` argument)."""
    default = "the newest LLM judge's, else the offline judge's"
    return click.option(
        "--judge",
        default=None,
        metavar="MODEL|offline",
        help=f"Whose verdicts {what}: a judge model, or offline (default: {default}).",
    )


def model_option(role: str) -> Decorator:
    """--model of a command that calls the LLM endpoint as `role` (judge, generator, writer)."""
    return click.option(
        "--model", default=None, help=f"{role.capitalize()} model (default RAGSQL_JUDGE_MODEL, else gpt-4o-mini)."
    )


def depth_option(most: int, help: str) -> Decorator:
    """--k: results per query of a retrieval run (retrieve, and demo's runs)."""
    return click.option("--k", "k", default=DEPTH, show_default=True, type=click.IntRange(1, most), help=help)


def top_n_option(most: int, help: str) -> Decorator:
    """--top-n: best-ranked results given to the generator as contexts (generate, and demo's answers)."""
    return click.option("--top-n", default=TOP_N, show_default=True, type=click.IntRange(1, most), help=help)


def workers_option(default: int, help: str) -> Decorator:
    """--workers: how many calls one process makes at once."""
    return click.option("--workers", default=default, show_default=True, type=click.IntRange(1, 256), help=help)


judging_options = _stacked(
    model_option("judge"),
    spec_option(
        "embedder",
        "e5 | e5-onnx | offline | openai[:MODEL] | sentence-transformers:MODEL | minilm (default: openai when an "
        "endpoint is configured, else offline).",
    ),
    click.option("--offline", is_flag=True, help="Use the offline heuristic judge even if an endpoint is configured."),
)
"""--model, --embedder, --offline of the commands that judge (judge, judge-check)."""
