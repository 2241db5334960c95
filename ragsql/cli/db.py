"""`ragsql db`: install the schema, show where the data lives, print the URL, stop the server."""

from __future__ import annotations

import os

import click

from ragsql import db

__all__ = ["db_group"]


@click.group("db")
def db_group() -> None:
    """Manage the database: init, url, status, stop."""


@db_group.command("init")
def init_command() -> None:
    """Apply sql/ (idempotent: running it twice changes nothing)."""
    with db.connect() as conn:
        # e.g. the roles ragsql_reader and ragsql_writer not created: the installer may not create roles
        conn.add_notice_handler(lambda d: click.echo(f"ragsql: {d.severity.lower()}: {d.message_primary}", err=True))
        version = db.install(conn)
        conn.commit()
    click.echo(f"ragsql schema ready (version {version})")


@db_group.command("url")
def url_command() -> None:
    """Print a connection URL that psql accepts (starts the embedded server if needed)."""
    click.echo(db.database_url())


@db_group.command("status")
def status_command() -> None:
    """Say where the data lives, the server version and the schema version."""
    external = os.environ.get("RAGSQL_DATABASE_URL")
    if external:
        click.echo("database:        RAGSQL_DATABASE_URL")
    else:
        info = db.embedded_status()
        click.echo(f"database:        embedded, data in {info.pgdata}")
        if not info.running:
            click.echo("server:          stopped (any ragsql command starts it)")
            return
    with db.connect() as conn:
        server = conn.execute("select current_setting('server_version')").fetchone()[0]
        vector = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()
        version = db.schema_version(conn)
        click.echo(f"url:             {conn.info.dsn}")
        click.echo(f"server:          PostgreSQL {server}, pgvector {vector[0] if vector else 'not installed'}")
        click.echo(f"schema version:  {version or 'not installed (run: ragsql db init)'}")


@db_group.command("stop")
def stop_command() -> None:
    """Stop the embedded server cleanly (its data stays in RAGSQL_HOME)."""
    if os.environ.get("RAGSQL_DATABASE_URL"):
        raise click.UsageError("RAGSQL_DATABASE_URL is set: ragsql does not manage that server")
    stopped = db.stop_embedded()
    click.echo("embedded PostgreSQL stopped" if stopped else "embedded PostgreSQL was not running")
