"""Apply sql/ to a database: the files install.sql names with \\ir, in order, in one transaction.

Functions, views and grants are applied every time; a migration runs once (skipped when
ragsql.schema_migration records it). The install ends by recording ragsql's version and the fingerprint
of the files, so ensure_schema knows with one query whether a database is current.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ragsql._version import __version__
from ragsql.db.rows import value
from ragsql.errors import SchemaError

if TYPE_CHECKING:
    import psycopg
    from typing_extensions import LiteralString

__all__ = [
    "sql_dir",
    "install_files",
    "migration_names",
    "fingerprint",
    "install",
    "distribute",
    "distributed",
    "schema_version",
    "ensure_schema",
]

_IR = re.compile(r"^\\ir\s+(\S+)\s*$")
_LOCK = "select pg_advisory_xact_lock(hashtext('ragsql.install'))"
_INSTALLED = "select fingerprint from ragsql.schema_install"


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


@cache
def fingerprint() -> str:
    """sha256 of ragsql's version and of every file install.sql applies (path and bytes, in order), then citus.sql:
    a change to the distribution reaches a distributed database with the next command, as an upgrade does."""
    digest = hashlib.sha256(__version__.encode() + b"\0")
    root = sql_dir()
    for path in [*install_files(), root / "citus.sql"]:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _installed(conn: psycopg.Connection) -> str | None:
    """The fingerprint recorded in the database, or None (not installed, or installed before fingerprints)."""
    if value(conn.execute("select to_regclass('ragsql.schema_install') is null")):
        return None
    row = conn.execute(_INSTALLED).fetchone()
    return row[0] if row else None


def _applied(conn: psycopg.Connection) -> set[str]:
    return {r[0] for r in conn.execute("select name from ragsql.schema_migration")}


def _apply(conn: psycopg.Connection, path: Path) -> None:
    import psycopg

    try:
        # a file of ragsql's own sql/, a script psql could run: trusted text, sent as written
        conn.execute(cast("LiteralString", path.read_text(encoding="utf-8")))
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SchemaError(
            f"{path.name}: {str(exc).strip().splitlines()[0]} (the owner of schema ragsql "
            "installs and upgrades it: ask them to run `ragsql db init`)"
        ) from exc
    except psycopg.Error as exc:
        raise SchemaError(f"{path.name}: {str(exc).strip().splitlines()[0]}") from exc


def install(conn: psycopg.Connection, *, when_changed: bool = False, distribute: bool = False) -> str:
    """Apply sql/ in one transaction under the install lock and return the schema version.

    Migrations recorded in ragsql.schema_migration are skipped. With when_changed, nothing is applied when
    the database already records this fingerprint (another process may have installed it while we waited).
    With distribute, or when the database is already distributed (an upgrade), sql/citus.sql follows in the same
    transaction: on a Citus coordinator it distributes what is not yet distributed.
    """
    with conn.transaction():
        if distribute and not _has_citus(conn):
            raise SchemaError(
                "--distribute needs a Citus coordinator: this database has no citus extension "
                "(one server needs only `ragsql db init`)"
            )
        conn.execute(_LOCK)
        if not (when_changed and _installed(conn) == fingerprint()):
            applied: set[str] | None = None
            for path in install_files():
                if path.parent.name == "migrations":
                    applied = _applied(conn) if applied is None else applied
                    if path.stem in applied:
                        continue
                _apply(conn, path)
            conn.execute("call ragsql._record_install(%s, %s)", (__version__, fingerprint()))
            if distribute or distributed(conn):
                _apply(conn, sql_dir() / "citus.sql")
    return schema_version(conn) or ""


def _has_citus(conn: psycopg.Connection) -> bool:
    return value(conn.execute("select exists (select from pg_extension where extname = 'citus')"))


def distributed(conn: psycopg.Connection) -> bool:
    """Whether ragsql's run-scoped tables are distributed (sql/citus.sql ran on this Citus coordinator)."""
    if not _has_citus(conn):
        return False
    return value(
        conn.execute(
            "select exists (select from pg_dist_partition where logicalrelid = to_regclass('ragsql.run_result'))"
        )
    )


def distribute(conn: psycopg.Connection) -> str:
    """Install sql/ and distribute it on a Citus coordinator (sql/citus.sql); SchemaError without Citus."""
    return install(conn, distribute=True)


def schema_version(conn: psycopg.Connection) -> str | None:
    """The newest applied migration, or None when ragsql is not installed in this database."""
    exists = value(conn.execute("select to_regclass('ragsql.schema_migration') is not null"))
    if not exists:
        return None
    return value(conn.execute("select max(name) from ragsql.schema_migration"))


def ensure_schema(conn: psycopg.Connection) -> None:
    """Install or upgrade sql/ unless the database records this fingerprint (one query when it does).

    Call it first on a fresh connection: when the schema is missing, the failed check is rolled back.
    """
    import psycopg

    try:
        row = conn.execute(_INSTALLED).fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        if not conn.autocommit:
            conn.rollback()
        row = None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SchemaError(
            f"{conn.info.user} may not read schema ragsql: a DBA grants ragsql_writer (or "
            "ragsql_reader) to it, see Roles in docs/guides/sql.md"
        ) from exc
    if row is not None and row[0] == fingerprint():
        return
    install(conn, when_changed=True)
    if not conn.autocommit:
        conn.commit()
