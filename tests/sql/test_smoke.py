def test_schema_installed(db):
    """The template database carries the ragsql schema and its default measures."""
    assert db.execute("select count(*) from ragsql.default_measure").fetchone()[0] == 14


JIT_UNSET = """
    select p.oid::regprocedure::text
    from pg_proc as p join pg_namespace as n on n.oid = p.pronamespace
    where n.nspname in ('ragsql', 'ragsql_report') and p.prokind = 'f' and p.provolatile <> 'i'
      and p.prolang = (select oid from pg_language where lanname = 'plpgsql')
      and not coalesce('jit=off' = any (p.proconfig), false)
    order by 1"""


def test_functions_that_read_tables_plan_without_jit(fresh_db):
    """Every PL/pgSQL function that may read tables carries jit = off (sql/998_jit.sql), also after the install
    runs again (create or replace drops a function's settings); immutable helpers keep none, so stay inlinable."""
    import psycopg

    from ragsql.db import install

    with psycopg.connect(fresh_db) as conn:
        marked = conn.execute("select count(*) from pg_proc as p join pg_namespace as n on n.oid = p.pronamespace "
                              "where n.nspname = 'ragsql' and 'jit=off' = any (p.proconfig)").fetchone()[0]
        assert marked >= 40, marked  # summarize, measure, evaluate_generation, compare, ...
        assert conn.execute(JIT_UNSET).fetchall() == []
        assert conn.execute("select proconfig from pg_proc where oid = 'ragsql.summarize(text, text[], integer)'::regprocedure"
                            ).fetchone()[0] == ["jit=off"]
        assert conn.execute("select count(*) from pg_proc as p join pg_namespace as n on n.oid = p.pronamespace "
                            "where n.nspname = 'ragsql' and p.provolatile = 'i' and p.proconfig is not null"
                            ).fetchone()[0] == 0
        install(conn)
        conn.commit()
        assert conn.execute(JIT_UNSET).fetchall() == []
