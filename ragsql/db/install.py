"""Apply sql/ to a database: the files install.sql names with \\ir, in order, in one transaction."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import psycopg

from ragsql.errors import SchemaError

__all__ = ["sql_dir", "install_files", "install", "schema_version", "ensure_schema"]

_IR = re.compile(r"^\\ir\s+(\S+)\s*$")


def sql_dir() -> Path:
    """The sql/ folder: inside the installed wheel, or at the top of a source checkout."""
    packaged = Path(str(resources.files("ragsql"))) / "sql"
    if (packaged / "install.sql").exists():
        return packaged
    source = Path(__file__).resolve().parents[2] / "sql"
    if (source / "install.sql").exists():
        return source
    raise SchemaError("the sql/ folder of ragsql is missing from this installation")


def install_files() -> list[Path]:
    """The files install.sql includes, in its order."""
    root = sql_dir()
    files = []
    for line in (root / "install.sql").read_text(encoding="utf-8").splitlines():
        match = _IR.match(line.strip())
        if match:
            files.append(root / match.group(1))
    return files


def migration_names() -> list[str]:
    """Names of the migrations this version of ragsql ships (e.g. '0010_core')."""
    return [p.stem for p in install_files() if p.parent.name == "migrations"]


def install(conn: psycopg.Connection) -> str:
    """Apply every SQL file in one transaction (idempotent) and return the schema version."""
    with conn.transaction():
        for path in install_files():
            try:
                conn.execute(path.read_text(encoding="utf-8"))
            except psycopg.Error as exc:
                raise SchemaError(f"{path.name}: {str(exc).strip().splitlines()[0]}") from exc
    return schema_version(conn) or ""


def schema_version(conn: psycopg.Connection) -> str | None:
    """The newest applied migration, or None when ragsql is not installed in this database."""
    exists = conn.execute("select to_regclass('ragsql.schema_migration') is not null").fetchone()[0]
    if not exists:
        return None
    row = conn.execute("select max(name) from ragsql.schema_migration").fetchone()
    return row[0]


def ensure_schema(conn: psycopg.Connection) -> None:
    """Install or upgrade the schema when a migration of this version is not applied yet."""
    applied = set()
    if schema_version(conn) is not None:
        applied = {r[0] for r in conn.execute("select name from ragsql.schema_migration")}
    if not set(migration_names()) <= applied:
        install(conn)
        if not conn.autocommit:
            conn.commit()
