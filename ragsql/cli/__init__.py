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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ragsql")
def cli() -> None:
    """RAG evaluation that lives in PostgreSQL.

    Load an eval set and the outputs of a RAG system, then read retrieval and
    generation metrics from SQL views. With no RAGSQL_DATABASE_URL, ragsql starts
    an embedded PostgreSQL whose data lives in RAGSQL_HOME.
    """


cli.add_command(db_group)
cli.add_command(import_group)
cli.add_command(ingest_command)
cli.add_command(retrieve_command)
cli.add_command(metrics_command)
cli.add_command(generate_command)
cli.add_command(judge_command)
cli.add_command(scores_command)
cli.add_command(diagnose_command)
cli.add_command(demo_command)


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
