"""A local Citus cluster for the suite's Citus mode (RAGSQL_TEST_CITUS=1): ../shared/citus/cluster.sh, and
databases made on every node of it.

A test database on the cluster is a database of that name on the coordinator and on each worker. A fresh one
gets the extensions and the node list; a clone of a distributed template is cloned on every node (the workers
hold the template's shards and metadata under the same names), so it is a distributed database of its own."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 8  # shards per distributed table in the suite's databases (Citus's default 32 makes installs slow)
EXTENSIONS = ("citus", "vector", "pg_trgm", "intarray")
_home: str | None = None  # CITUS_HOME of the cluster this process started


def sources() -> Path:
    """The folder with Citus's build.sh and cluster.sh: RAGSQL_CITUS_SOURCES, else ../shared/citus beside the
    project, else /work/shared/citus."""
    for folder in (os.environ.get("RAGSQL_CITUS_SOURCES"), ROOT.parent / "shared" / "citus", "/work/shared/citus"):
        if folder and (Path(folder) / "cluster.sh").is_file():
            return Path(folder).resolve()
    raise RuntimeError(
        "RAGSQL_TEST_CITUS=1 needs the Citus sources: set RAGSQL_CITUS_SOURCES to the folder with "
        "cluster.sh (../shared/citus), and run its build.sh once as root"
    )


def _port() -> int:
    """The coordinator's port: CITUS_PORT (9700), plus 20 for each xdist worker before this one (gw0, gw1, ...), so
    that each worker's cluster, and its spare at + 10, has ports of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return int(os.environ.get("CITUS_PORT", "9700")) + 20 * int(worker or 0)


def _cluster(command: str, home: str, port: int | None = None) -> str:
    """Runs cluster.sh COMMAND for the cluster whose data is in `home` and whose coordinator listens on `port`
    (CITUS_PORT by default), as root: it runs the servers as the OS user postgres; returns its output."""
    if not Path("/usr/lib/postgresql/15/lib/citus.so").exists():
        raise RuntimeError(f"Citus is not built: run sudo bash {sources() / 'build.sh'} once")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"] if shutil.which("sudo") else []
    # the settings on env's command line: sudo passes no environment through
    done = subprocess.run(
        [
            *sudo,
            "env",
            f"CITUS_HOME={home}",
            f"CITUS_PORT={port or _port()}",
            "bash",
            str(sources() / "cluster.sh"),
            command,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cluster.sh {command} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.strip()


def start() -> str:
    """Starts a fresh cluster for this test process (data in a folder of its own); returns the coordinator URL."""
    global _home
    _home = os.environ.get("CITUS_HOME") or f"/tmp/ragsql-citus-suite-{os.getpid()}"
    _cluster("reset", _home)
    return _cluster("start", _home)


def started() -> bool:
    """Whether this process started the cluster (and so may restart or remove it)."""
    return _home is not None


def restart() -> None:
    """Stops and starts the three servers of the cluster this process started (data kept)."""
    assert _home is not None, "restart() of a cluster this process did not start"
    _cluster("stop", _home)
    _cluster("start", _home)


def stop_started() -> None:
    """Stops the cluster this process started and removes its data."""
    global _home
    if _home is not None:
        _cluster("reset", _home)
        _home = None


@contextlib.contextmanager
def spare() -> Iterator[str]:
    """A second cluster, new and empty (ports CITUS_PORT + 10 to + 12, data in a folder of its own), for a test that
    needs nodes no other test has touched (roles are shared by every database of a node); removed at the end.
    Yields its coordinator's URL (database postgres, with the extensions)."""
    port = _port() + 10
    home = f"/tmp/ragsql-citus-spare-{os.getpid()}"
    _cluster("reset", home, port)
    try:
        yield _cluster("start", home, port)
    finally:
        _cluster("reset", home, port)


def _with_dbname(url: str, dbname: str) -> str:
    return make_conninfo(url, dbname=dbname)


def nodes(server_url: str) -> list[str]:
    """Admin URLs (database postgres) of every node: the coordinator's first, then the workers'."""
    with psycopg.connect(server_url, autocommit=True) as conn:
        workers = conn.execute(
            "select nodename, nodeport from pg_dist_node where groupid <> 0 and isactive order by nodeport"
        ).fetchall()
    params = conninfo_to_dict(server_url)
    return [make_conninfo(server_url, dbname="postgres")] + [
        make_conninfo(**{**params, "host": host, "port": str(port), "dbname": "postgres"}) for host, port in workers
    ]


def _alone(admin: psycopg.Connection, dbname: str) -> None:
    """Ends the other sessions on a database (Citus's maintenance daemon keeps one on every database with the
    extension) so that it can be a template or be dropped."""
    admin.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s and pid <> pg_backend_pid()",
        (dbname,),
    )


def create_database(server_url: str, name: str, template: str | None = None) -> str:
    """Creates database NAME on every node, a clone of TEMPLATE or a fresh one with the extensions and the
    coordinator's node list; returns its URL on the coordinator."""
    urls = nodes(server_url)
    for url in urls:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')
            clause = f' template "{template}"' if template else ""
            deadline = time.monotonic() + 10
            while True:
                if template:
                    _alone(admin, template)
                try:
                    admin.execute(f'create database "{name}"{clause}')
                    break
                except psycopg.errors.ObjectInUse:  # the daemon came back between the two statements
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        if not template:
            with psycopg.connect(_with_dbname(url, name), autocommit=True) as conn:
                for extension in EXTENSIONS:
                    conn.execute(f"create extension if not exists {extension}")
    if not template:
        coordinator = conninfo_to_dict(server_url)
        with psycopg.connect(_with_dbname(server_url, name), autocommit=True) as conn:
            conn.execute(
                "select citus_set_coordinator_host(%s, %s)",
                (coordinator.get("host", "127.0.0.1"), int(coordinator.get("port", 5432))),
            )
            for url in urls[1:]:
                params = conninfo_to_dict(url)
                conn.execute("select citus_add_node(%s, %s)", (params["host"], int(params["port"])))
    return _with_dbname(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    """Drops database NAME on every node (if there), retrying while Citus's daemon reconnects to it."""
    for url in nodes(server_url):
        with psycopg.connect(url, autocommit=True) as admin:
            deadline = time.monotonic() + 10
            while True:
                try:
                    admin.execute(f'drop database if exists "{name}" with (force)')
                    break
                except psycopg.errors.ObjectInUse:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
