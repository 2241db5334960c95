"""The `ragsql` command line: parses arguments, formats output, maps errors to exit codes."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import TYPE_CHECKING

import click

from ragsql._version import __version__
from ragsql.errors import EXIT_CODES, RagsqlError, UsageError

if TYPE_CHECKING:
    import psycopg
    from typing_extensions import TypeIs

__all__ = ["COMMANDS", "cli", "error_line", "main"]

EPILOG = "\b\nExit status:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES.items())

COMMANDS = {  # name: (module, attribute, summary), in the order of the workflow
    "demo": ("demo", "demo_command", "The whole pipeline offline on a bundled bilingual corpus."),
    "db": ("db", "db_group", "Manage the database: init, url, status, stop."),
    "import": ("imports", "import_group", "Load an eval set, TREC qrels and runs, or a RAG system's outputs."),
    "ingest": ("ingest", "ingest_command", "Load documents into a corpus: chunks, BM25 postings, embeddings."),
    "synth": ("synth", "synth_command", "Write an eval set from a corpus: questions, answers, gold spans."),
    "retrieve": ("retrieve", "retrieve_command", "Retrieve for an eval set (bm25, vector, fuzzy, hybrid) as a run."),
    "fuse": ("fuse", "fuse_command", "Fuse runs of a dataset into a new run (rrf, combsum, wsum, ... as ranx)."),
    "generate": ("generate", "generate_command", "Generate cited answers for a run from its retrieved results."),
    "judge": ("judge", "judge_command", "Judge a run's answers with an LLM (or offline); store verdicts."),
    "metrics": (
        "metrics",
        "metrics_command",
        "Retrieval measures (trec_eval semantics) or generation metrics of a run.",
    ),
    "scores": ("scores", "scores_command", "Retrieval and generation metrics of a run together."),
    "diagnose": ("diagnose", "diagnose_command", "What is wrong with a run, by the seeds' rules."),
    "compare": ("compare", "compare_command", "Is a run really better? Differences, intervals, p-values."),
    "check": ("check", "check_command", "Quality gates for nightly jobs and CI: exit 4 when one fails."),
    "history": ("history", "history_command", "Every run value of a dataset over time: drift across nightly runs."),
    "report": ("report", "report_command", "A run's report in the terminal, or one HTML page with charts."),
    "watch": ("watch", "watch_group", "Judge a production log table as rows arrive, in hourly or daily windows."),
    "review": ("review", "review_group", "Human review of the judge: export a sheet, import labels."),
    "judge-check": ("judge_check", "judge_check_command", "Measure a judge's pairwise accuracy on labelled pairs."),
    "aspect": ("aspect", "aspect_group", "Add, list or remove the yes/no aspects aspect critique asks."),
    "rubric": ("rubric", "rubric_group", "Add, list or remove the 1-5 score rubrics of rubrics_score (RAGAS)."),
    "list": ("catalog", "list_command", "List the runs, datasets or corpora stored."),
    "show": ("catalog", "show_group", "Show one stored run in full: counts, judges, configuration."),
    "delete": ("catalog", "delete_command", "Delete a run, dataset or corpus and what belongs to it."),
}
"""Each command's module is imported only when that command runs (or its own help is asked for), so that
`ragsql --version` and `ragsql db url` do not load openai, the tokenizer or the judge."""


class _Workflow(click.Group):
    """Lists commands in the order of the workflow, each with a one-line summary; loads a command when used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, summary = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"ragsql.cli.{module}"), attribute)
        command.short_help = summary
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, _, summary) in COMMANDS.items()])


@click.group(
    cls=_Workflow, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="ragsql")
def cli() -> None:
    """RAG evaluation that lives in PostgreSQL.

    Load an eval set and the outputs of a RAG system (or let ragsql ingest, retrieve
    and generate), judge the answers, then read retrieval and generation metrics from
    SQL views. With no RAGSQL_DATABASE_URL, ragsql starts an embedded PostgreSQL whose
    data lives in RAGSQL_HOME. Try `ragsql demo`.
    """


class _QuietRollback(logging.Filter):
    """Drops psycopg's warnings about cleaning up after an error or a cancellation ("error ignored in rollback",
    "error ignored terminating <pipeline>", "query cancellation interrupted"): the error that caused them is
    handled or reported on its own line (e.g. a run deleted while it was judged stops the other workers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(
            ("error ignored in rollback", "error ignored terminating", "query cancellation")
        )


_QUIET_ROLLBACK = _QuietRollback()


def _line(text: object) -> str:
    """Any message as one line."""
    return " ".join(str(text).split())


def _usage(exc: click.UsageError) -> str:
    where = exc.ctx.command_path if exc.ctx is not None else "ragsql"
    return f"ragsql: usage: {_line(exc.format_message())} (see: {where} --help)"


def _is_database_error(exc: BaseException) -> TypeIs[psycopg.Error]:
    """A psycopg error (psycopg is imported only by the commands that talk to the database)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


def _unstorable(argv: list[str]) -> str | None:
    """Why an argument cannot reach PostgreSQL text (a NUL, or bytes that are no UTF-8), or None."""
    for arg in argv:
        if "\0" in arg:
            return f"argument {arg!r} contains a NUL character, which PostgreSQL text cannot hold"
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"argument {arg!r} is not valid UTF-8 (it holds {arg[exc.start]!r}: a byte that is no UTF-8, "
                "or a lone surrogate)"
            )
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; every error is one line on stderr and an exit status of the contract."""
    for name in ("psycopg", "psycopg.transaction"):  # a filter applies to its own logger's records only
        logging.getLogger(name).addFilter(_QUIET_ROLLBACK)
    unstorable = _unstorable(sys.argv[1:] if argv is None else argv)
    if unstorable is not None:
        click.echo(f"ragsql: usage: {unstorable}", err=True)
        return 2
    try:
        status = cli.main(args=argv, prog_name="ragsql", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("ragsql: aborted", err=True)
        return 130
    except click.UsageError as exc:  # a missing or unknown option, an invalid option value
        ctx = exc.ctx if type(exc).__name__ == "NoArgsIsHelpError" else None
        click.echo(ctx.get_help() if ctx is not None else _usage(exc), err=True)  # a bare group: its help
        return 2
    except click.ClickException as exc:
        click.echo(f"ragsql: error: {_line(exc.format_message())}", err=True)
        return 1
    except UsageError as exc:
        click.echo(f"ragsql: usage: {_line(exc)}", err=True)
        return exc.exit_code
    except RagsqlError as exc:
        click.echo(f"ragsql: error: {_line(exc)}", err=True)
        return exc.exit_code
    except Exception as exc:
        line = error_line(exc)
        if line is None:
            raise
        click.echo(f"ragsql: error: {line}", err=True)
        return 1
    return status if isinstance(status, int) else 0


def error_line(exc: BaseException) -> str | None:
    """What `ragsql: error:` says of a ragsql or database error: one line (a database error's hint in brackets);
    None for any other exception (a bug, whose traceback is shown)."""
    if isinstance(exc, RagsqlError):
        return _line(exc)
    if not _is_database_error(exc):
        return None
    message = (exc.diag.message_primary or str(exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
    return _line(message + hint)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
