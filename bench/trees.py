"""What the benches that compare this tree with an earlier commit share: the commit's files, and a new database
on the bench's server (`python bench/<name>.py` puts bench/ on sys.path, so `from trees import ...` works)."""

from __future__ import annotations

import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tree_of(ref: str, dest: Path) -> Path:
    """The files of commit `ref` in `dest`, from `git archive`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref], capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def with_db(url: str, dbname: str) -> str:
    """`url` naming database `dbname`."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(url, dbname=dbname)


def new_database(admin_url: str, name: str, checkpoint: bool = False) -> str:
    """An empty database `name` (dropped first if there) on the server of `admin_url`; its URL. With checkpoint,
    the server writes out its dirty pages first, so that a timed load does not pay for the previous one's."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        if checkpoint:
            admin.execute("checkpoint")
    return with_db(admin_url, name)
