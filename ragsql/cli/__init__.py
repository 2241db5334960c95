"""The `ragsql` command line: parses arguments, formats output, maps errors to exit codes."""

from __future__ import annotations

import sys

import click
import psycopg

from ragsql import __version__
from ragsql.cli.db import db_group
from ragsql.cli.demo import demo_command
from ragsql.cli.diagnose import diagnose_command
from ragsql.cli.generate import generate_command
from ragsql.cli.imports import import_group
from ragsql.cli.ingest import ingest_command
from ragsql.cli.judge import judge_command
from ragsql.cli.metrics import metrics_command
from ragsql.cli.retrieve import retrieve_command
from ragsql.cli.scores import scores_command
from ragsql.errors import RagsqlError

__all__ = ["cli", "main"]


class _Workflow(click.Group):
    """Lists commands in the order of the workflow, each with a one-line summary."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_Workflow, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ragsql")
def cli() -> None:
    """RAG evaluation that lives in PostgreSQL.

    Load an eval set and the outputs of a RAG system (or let ragsql ingest, retrieve
    and generate), judge the answers, then read retrieval and generation metrics from
    SQL views. With no RAGSQL_DATABASE_URL, ragsql starts an embedded PostgreSQL whose
    data lives in RAGSQL_HOME. Try `ragsql demo`.
    """


for command, summary in (
    (demo_command, "The whole pipeline offline on a bundled bilingual corpus."),
    (db_group, "Manage the database: init, url, status, stop."),
    (import_group, "Load an eval set, TREC qrels and runs, or a RAG system's outputs."),
    (ingest_command, "Load documents into a corpus: chunks, BM25 postings, embeddings."),
    (retrieve_command, "Retrieve for an eval set (bm25, vector, fuzzy, hybrid) as a run."),
    (generate_command, "Generate cited answers for a run from its retrieved results."),
    (judge_command, "Judge a run's answers with an LLM (or offline); store verdicts."),
    (metrics_command, "Retrieval measures of a run (trec_eval semantics)."),
    (scores_command, "Retrieval and generation metrics of a run together."),
    (diagnose_command, "What is wrong with a run, by the seeds' rules."),
):
    command.short_help = summary
    cli.add_command(command)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; any ragsql or database error is one line on stderr."""
    try:
        status = cli.main(args=argv, prog_name="ragsql", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("ragsql: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except RagsqlError as exc:
        click.echo(f"ragsql: error: {exc}", err=True)
        return exc.exit_code
    except psycopg.Error as exc:
        message = (exc.diag.message_primary or str(exc)).strip().splitlines()[0]
        hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
        click.echo(f"ragsql: error: {message}{hint}", err=True)
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
