"""`ragsql db`: install the schema, show where the data lives, print the URL, stop the server."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import quote

import click

from ragsql import db
from ragsql.cli.output import format_option, report
from ragsql.db.rows import value

if TYPE_CHECKING:
    import psycopg

__all__ = ["db_group"]


@click.group("db")
def db_group() -> None:
    """Manage the database: init, url, status, stop."""


@db_group.command("init")
@click.option(
    "--distribute",
    is_flag=True,
    help="On a Citus coordinator: also distribute the schema (sql/citus.sql): run tables by run_id.",
)
def init_command(distribute: bool) -> None:
    """Apply sql/ (idempotent: running it twice changes nothing)."""
    with db.connect() as conn:
        # e.g. the roles ragsql_reader and ragsql_writer not created: the installer may not create roles
        conn.add_notice_handler(_echo_notice)
        version = db.distribute(conn) if distribute else db.install(conn)
        layout = ", distributed on Citus" if db.distributed(conn) else ""
        conn.commit()
    click.echo(f"ragsql schema ready (version {version}{layout})")


def _echo_notice(diag: psycopg.errors.Diagnostic) -> None:
    # Citus warns of every function or view over a table it does not manage (the corpus stays on the coordinator
    # by design, see sql/citus.sql): that is the layout, not a problem to report
    if "not in Citus' metadata" not in (diag.message_primary or ""):
        click.echo(f"ragsql: {(diag.severity or 'notice').lower()}: {diag.message_primary}", err=True)


@db_group.command("url")
def url_command() -> None:
    """Print a connection URL that psql accepts (starts the embedded server if needed)."""
    click.echo(db.database_url())


@db_group.command("status")
@format_option()
def status_command(fmt: str) -> None:
    """Say where the data lives, a psql URL, the server version and the schema version."""
    external = bool(os.environ.get("RAGSQL_DATABASE_URL"))
    info = None if external else db.embedded_status()
    status = {
        "database": "RAGSQL_DATABASE_URL" if external else "embedded",
        "data": None if info is None else str(info.pgdata),
        "running": True,
        "url": None,
        "server_version": None,
        "pgvector": None,
        "schema_version": None,
    }
    if info is not None and not info.running:
        status["running"] = False
    else:
        with db.connect() as conn:
            status["url"] = psql_url(conn)
            status["server_version"] = value(conn.execute("select current_setting('server_version')"))
            vector = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()
            status["pgvector"] = vector[0] if vector else None
            status["schema_version"] = db.schema_version(conn)
    if fmt == "json":
        report(status)
        return
    where = "RAGSQL_DATABASE_URL" if external else f"embedded, data in {status['data']}"
    click.echo(f"database:        {where}")
    if not status["running"]:
        click.echo("server:          stopped (any ragsql command starts it)")
        return
    click.echo(f"url:             {status['url']}")
    click.echo(
        f"server:          PostgreSQL {status['server_version']}, pgvector {status['pgvector'] or 'not installed'}"
    )
    click.echo(f"schema version:  {status['schema_version'] or 'not installed (run: ragsql db init)'}")


def psql_url(conn: psycopg.Connection) -> str:
    """postgresql://user@host:port/dbname of a connection, with only what psql 14+ knows and no password."""
    p = conn.info.get_parameters()
    user = quote(p["user"], safe="") + "@" if p.get("user") else ""
    host, port = p.get("host", ""), p.get("port", "")
    query = []
    if host.startswith("/"):  # a Unix socket directory goes in the query string
        query.append("host=" + quote(host, safe="/"))
        host = ""
    elif ":" in host:  # an IPv6 address
        host = f"[{host}]"
    netloc = user + quote(host, safe="[]:") + (f":{port}" if port else "")
    if p.get("sslmode"):
        query.append("sslmode=" + p["sslmode"])
    return f"postgresql://{netloc}/{quote(p.get('dbname', ''), safe='')}" + ("?" + "&".join(query) if query else "")


@db_group.command("stop")
def stop_command() -> None:
    """Stop the embedded server cleanly (its data stays in RAGSQL_HOME)."""
    if os.environ.get("RAGSQL_DATABASE_URL"):
        raise click.UsageError("RAGSQL_DATABASE_URL is set: ragsql does not manage that server")
    stopped = db.stop_embedded()
    click.echo("embedded PostgreSQL stopped" if stopped else "embedded PostgreSQL was not running")
