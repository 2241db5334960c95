"""ragsql's roles on a Citus cluster whose coordinator already had them from an install without Citus.

Roles belong to a node, not to a database: the test needs nodes where no install has created them yet. Named to
be collected first in tests/citus, it finds the suite's new cluster so and uses it (in the database ragsql_roles);
where an earlier install created the roles (a cluster named by RAGSQL_DATABASE_URL, or the file run after
others), it starts a second cluster of its own (tests/cluster.py `spare`, some 10-40 s more)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import psycopg
from psycopg.conninfo import make_conninfo

from ragsql.db import install
from tests import cluster

ROLES = "select rolname from pg_roles where rolname in ('ragsql_reader', 'ragsql_writer') order by 1"
LOGIN = "ragsql_test_login"


def _roles(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(ROLES).fetchall()


@contextlib.contextmanager
def _cluster_without_the_roles() -> Iterator[str]:
    """The URL of a citus database on a cluster none of whose nodes has ragsql's roles yet."""
    url = os.environ["RAGSQL_DATABASE_URL"]
    if any(_roles(node) for node in cluster.nodes(url)):
        with cluster.spare() as spare:
            yield spare
        return
    try:
        yield cluster.create_database(url, "ragsql_roles")
    finally:
        cluster.drop_database(url, "ragsql_roles")
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"drop role if exists {LOGIN}")


def test_an_install_without_citus_first_leaves_the_roles_usable_on_every_worker():
    """ragsql installed into a database of the coordinator without the citus extension creates the roles there
    alone (Citus sends CREATE ROLE only from a citus database); an install into a citus database next creates them
    on the workers, and a login member of ragsql_writer reads and writes the shards."""
    with _cluster_without_the_roles() as url:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("set client_min_messages = warning")
            admin.execute("drop database if exists ragsql_roles_plain with (force)")
            admin.execute("create database ragsql_roles_plain")  # on the coordinator only, without citus
        try:
            with psycopg.connect(make_conninfo(url, dbname="ragsql_roles_plain")) as conn:
                conn.execute("create extension vector")
                install(conn)
                conn.commit()
        finally:
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("drop database ragsql_roles_plain with (force)")
        coordinator, *workers = cluster.nodes(url)
        assert _roles(coordinator) == [("ragsql_reader",), ("ragsql_writer",)]
        assert [_roles(node) for node in workers] == [[], []]  # the case this test is about
        with psycopg.connect(url) as conn:
            conn.execute("set citus.shard_count = 2")  # (fewer shards: a faster install)
            install(conn, distribute=True)
            conn.commit()
        assert [_roles(node) for node in workers] == [[("ragsql_reader",), ("ragsql_writer",)]] * 2
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"create role {LOGIN} login; grant ragsql_writer to {LOGIN}")
        with psycopg.connect(make_conninfo(url, user=LOGIN)) as writer:
            # a reference table (a copy written on every node) and a distributed one (read from every shard)
            writer.execute("insert into ragsql.dataset (name) values ('on every node')")
            assert writer.execute("select count(*) from ragsql.dataset").fetchone() == (1,)
            assert writer.execute("select count(*) from ragsql.answer").fetchone() == (0,)
            writer.commit()
        with psycopg.connect(url) as conn:  # an upgrade revokes and grants again on every node
            install(conn)
            conn.commit()
