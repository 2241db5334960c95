"""What the benches that compare this tree with an earlier commit share: the commit's files, and a new database
on the bench's server (`python bench/<name>.py` puts bench/ on sys.path, so `from trees import ...` works)."""

from __future__ import annotations

import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PHASE_TIMER = r"""
import os, time
ticks = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    # the backend's CPU time, and that of the postmaster's children that exited (parallel workers of an index
    # build are reaped by the postmaster, their time added to its cutime and cstime)
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    parent = open(f"/proc/{fields[1]}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12]) + int(parent[13]) + int(parent[14])) / ticks
def timed(spent, phase, fn):
    # fn, adding its wall time and the server's CPU time (backend `pid`, a global of the script) to spent[phase]
    def call(*args, **kwargs):
        started, server = time.perf_counter(), cpu(pid)
        try:
            return fn(*args, **kwargs)
        finally:
            wall, used = spent.get(phase, (0.0, 0.0))
            spent[phase] = (wall + time.perf_counter() - started, used + cpu(pid) - server)
    return call
"""
"""Source a bench's child script includes (it runs under another tree's PYTHONPATH, so it cannot import this
file): `timed(spent, phase, fn)` wraps a database function to time it by phase."""


def tree_of(ref: str, dest: Path) -> Path:
    """The files of commit `ref` in `dest`, from `git archive`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", ref], capture_output=True, check=True
    ).stdout
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


def scratch_database(name: str = "ragsql_bench", *, installed: bool = False, reuse: bool = False) -> str:
    """Database `name` on ragsql's configured server, new (or, with `reuse`, kept when there), with ragsql's schema
    installed if `installed`; its URL."""
    import psycopg

    from ragsql import db
    from ragsql.db import install

    base = db.database_url()
    with psycopg.connect(base, autocommit=True) as admin:
        kept = reuse and admin.execute("select from pg_database where datname = %s", (name,)).fetchone() is not None
    url = with_db(base, name) if kept else new_database(base, name)
    if installed:
        with psycopg.connect(url) as conn:
            install(conn)
            conn.commit()
    return url
