"""The distributed layout (Citus) beside one embedded server: each test runs a flow on both and compares.

Collected only when RAGSQL_DATABASE_URL is a Citus coordinator (see tests/conftest.py); CI starts one with
../shared/citus/cluster.sh. The flows go through the CLI in a subprocess, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragsql.db import install

ROOT = Path(__file__).resolve().parents[2]


class Side:
    """One database (the cluster's coordinator or the embedded server) and the CLI pointed at it."""

    def __init__(self, name: str, env: dict[str, str], url: str) -> None:
        self.name, self.env, self.url = name, env, url

    def cli(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from ragsql.cli import main; sys.exit(main())", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if ok and done.returncode != 0:
            raise AssertionError(f"{self.name}: ragsql {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def json(self, *args: str):
        return json.loads(self.cli(*args, "--format", "json").stdout)

    def rows(self, query: str, params=()) -> list[tuple]:
        with psycopg.connect(self.url) as conn:
            return conn.execute(query, params).fetchall()


def _reset(url: str, distribute: bool) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("drop schema if exists ragsql_report cascade")
        conn.execute("drop schema if exists ragsql cascade")
        conn.commit()
        install(conn, distribute=distribute)
        conn.commit()


def _env(**changes: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in changes}
    env.update({k: v for k, v in changes.items() if v is not None})
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("RAGSQL_EMBEDDER", "offline")
    return env


@pytest.fixture(scope="session")
def citus() -> Side:
    """The Citus coordinator in RAGSQL_DATABASE_URL, its schema installed anew and distributed."""
    url = os.environ["RAGSQL_DATABASE_URL"]
    _reset(url, distribute=True)
    return Side("citus", _env(RAGSQL_DATABASE_URL=url), url)


@pytest.fixture(scope="session")
def plain() -> Side:
    """One server of the cluster's own build (PostgreSQL 15): a database on the coordinator without the citus
    extension. Text search stems as PostgreSQL 15 does (the embedded 18 stems 'adding' to 'add', 15 to 'ad'),
    so ranked retrieval from an ingested corpus is compared with this one."""
    admin_url = os.environ["RAGSQL_DATABASE_URL"]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("set client_min_messages = warning")
        admin.execute("drop database if exists ragsql_plain with (force)")
        admin.execute("create database ragsql_plain")
    params = conninfo_to_dict(admin_url)
    params["dbname"] = "ragsql_plain"
    url = make_conninfo(**params)
    with psycopg.connect(url) as conn:
        conn.execute("create extension if not exists vector")
        conn.commit()
    _reset(url, distribute=False)
    yield Side("plain", _env(RAGSQL_DATABASE_URL=url), url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("drop database if exists ragsql_plain with (force)")


@pytest.fixture(scope="session")
def single(tmp_path_factory) -> Side:
    """An embedded PostgreSQL of its own (one server), the schema installed anew."""
    from ragsql.db import server

    home = str(tmp_path_factory.mktemp("single_home"))
    kept = {k: os.environ.get(k) for k in ("RAGSQL_HOME", "RAGSQL_DATABASE_URL")}
    os.environ["RAGSQL_HOME"] = home
    os.environ.pop("RAGSQL_DATABASE_URL")
    try:
        url = server.ensure_embedded()
    finally:
        for k, v in kept.items():
            if v is not None:
                os.environ[k] = v
    _reset(url, distribute=False)
    yield Side("single", _env(RAGSQL_DATABASE_URL=None, RAGSQL_HOME=home), url)
    os.environ["RAGSQL_HOME"] = home
    try:
        server.stop_embedded()
    finally:
        os.environ.pop("RAGSQL_HOME")
        if kept["RAGSQL_HOME"] is not None:
            os.environ["RAGSQL_HOME"] = kept["RAGSQL_HOME"]
