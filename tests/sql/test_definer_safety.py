"""Security definer functions give no way up: where schema public is writable (PostgreSQL 14's default), objects a
reader or a writer plants on a definer function's search_path never run with the owner's rights, and no function of
the owner's is executable by PUBLIC."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from tests.conftest import EXAMPLE, cli_database
from tests.sql.test_roles import _member

# Every function of schema ragsql or ragsql_report that PUBLIC may execute: none (readers and writers get theirs
# by name in sql/999_grants.sql).
PUBLIC_EXECUTE: set[str] = set()

# sqlstates of a name that did not resolve: a definer function whose pinned search_path lacks a schema it needs
UNRESOLVED = {"42883", "42P01", "42704", "3F000"}


@pytest.fixture(scope="module")
def fixture_url(server_url, template_url, tmp_path_factory):
    """Two runs of the bundled example eval set (one judged offline) and a small ingested corpus, public writable
    by everyone as on PostgreSQL 14."""
    docs = tmp_path_factory.mktemp("definer_docs")
    (docs / "a.txt").write_text("PostgreSQL stores the evaluation next to the data.\n", encoding="utf-8")
    (docs / "b.txt").write_text("The judge replies are cached by request hash.\n", encoding="utf-8")
    with cli_database(
        server_url,
        ["import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex"],
        ["import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex2"],
        ["judge", "--run", "ex", "--offline", "--metrics", "faithfulness,answer_similarity"],
        ["ingest", str(docs), "--corpus", "c"],
    ) as url:
        with psycopg.connect(url, autocommit=True) as owner:
            owner.execute("grant create on schema public to public")
        yield url


# Planted by the attacker in each schema it may create in: overloads more specific than pg_catalog's (which win
# whatever the order of the path), and namesakes (which win where the schema precedes pg_catalog). Each body
# reports itself through public.ragsql_pwned when it runs as someone other than the attacker.
HOSTILE_FUNCTIONS = [
    ("unnest", "a float8[]", "setof float8", "return query select pg_catalog.unnest(a);"),
    ("unnest", "a text[]", "setof text", "return query select pg_catalog.unnest(a);"),
    ("unnest", "a integer[]", "setof integer", "return query select pg_catalog.unnest(a);"),
    ("unnest", "a bigint[]", "setof bigint", "return query select pg_catalog.unnest(a);"),
    ("cardinality", "a float8[]", "integer", "return pg_catalog.cardinality(a);"),
    ("cardinality", "a text[]", "integer", "return pg_catalog.cardinality(a);"),
    ("array_length", "a float8[], d integer", "integer", "return pg_catalog.array_length(a, d);"),
    ("array_length", "a text[], d integer", "integer", "return pg_catalog.array_length(a, d);"),
    ("lower", "a text", "text", "return pg_catalog.lower(a);"),
    ("upper", "a text", "text", "return pg_catalog.upper(a);"),
    ("length", "a text", "integer", "return pg_catalog.length(a);"),
    ("format", "f text, a text", "text", "return pg_catalog.format(f, a);"),
    ("format", "f text, a bigint", "text", "return pg_catalog.format(f, a);"),
    ("to_regclass", "a text", "regclass", "return pg_catalog.to_regclass(a);"),
    ("sort", "a integer[]", "integer[]", "return a;"),
    ("pwned_eq", "a text, b text", "boolean", "return a operator(pg_catalog.=) b;"),
    ("pwned_ne", "a text, b text", "boolean", "return a operator(pg_catalog.<>) b;"),
    ("pwned_cat", "a text, b bigint", "text", "return a operator(pg_catalog.||) b::text;"),
    ("pwned_cat", "a text, b integer", "text", "return a operator(pg_catalog.||) b::text;"),
    ("pwned_append", "s integer[], a integer", "integer[]", "return pg_catalog.array_append(s, a);"),
    ("pwned_append", "s bigint[], a bigint", "bigint[]", "return pg_catalog.array_append(s, a);"),
    ("pwned_append", "s float8[], a float8", "float8[]", "return pg_catalog.array_append(s, a);"),
    ("pwned_append", "s text[], a text", "text[]", "return pg_catalog.array_append(s, a);"),
]
HOSTILE_OTHERS = [
    "create operator {s}.= (leftarg = text, rightarg = text, function = {s}.pwned_eq)",
    "create operator {s}.<> (leftarg = text, rightarg = text, function = {s}.pwned_ne)",
    "create operator {s}.|| (leftarg = text, rightarg = bigint, function = {s}.pwned_cat)",
    "create operator {s}.|| (leftarg = text, rightarg = integer, function = {s}.pwned_cat)",
    "create aggregate {s}.array_agg(integer) (sfunc = {s}.pwned_append, stype = integer[])",
    "create aggregate {s}.array_agg(bigint) (sfunc = {s}.pwned_append, stype = bigint[])",
    "create aggregate {s}.array_agg(float8) (sfunc = {s}.pwned_append, stype = float8[])",
    "create aggregate {s}.array_agg(text) (sfunc = {s}.pwned_append, stype = text[])",
]
# pg_temp is searched for types and tables (never for functions and operators): pgvector's type names, with casts
# that run the attacker's function, catch a body that names them unqualified on a path without pgvector's schema.
HOSTILE_TEMP = [
    "create type pg_temp.vector as (x integer)",
    "create type pg_temp.sparsevec as (x integer)",
    "create function pg_temp.pwned_vector(a real[]) returns pg_temp.vector language plpgsql as "
    "$f$ begin perform public.ragsql_pwned('::vector'); return row(1); end $f$",
    "create function pg_temp.pwned_sparsevec(a text) returns pg_temp.sparsevec language plpgsql as "
    "$f$ begin perform public.ragsql_pwned('::sparsevec'); return row(1); end $f$",
    "create cast (real[] as pg_temp.vector) with function pg_temp.pwned_vector(real[])",
    "create cast (text as pg_temp.sparsevec) with function pg_temp.pwned_sparsevec(text)",
]


def _plant(conn: psycopg.Connection) -> None:
    """Creates the hostile objects as this login in public and in every schema on a ragsql function's search_path
    it may create in, and in its temporary schema."""
    conn.execute("""
        create sequence public.ragsql_pwned_seq;
        grant usage on sequence public.ragsql_pwned_seq to public;
        create function public.ragsql_pwned(what text) returns void language plpgsql as $f$
        begin
            if current_user operator(pg_catalog.<>) session_user then
                perform pg_catalog.nextval('public.ragsql_pwned_seq'::pg_catalog.regclass);
                raise exception 'pwned: % ran as %', what, current_user;
            end if;
        end $f$""")
    paths = conn.execute("""
        select distinct btrim(s.name, ' "')
        from pg_proc as p
        cross join lateral unnest(p.proconfig) as c(setting)
        cross join lateral unnest(string_to_array(substr(c.setting, length('search_path=') + 1), ',')) as s(name)
        where p.pronamespace in ('ragsql'::regnamespace, 'ragsql_report'::regnamespace)
          and c.setting like 'search_path=%'""").fetchall()
    schemas = ["public"] + sorted(
        name
        for (name,) in paths
        if name not in ("public", "pg_temp", "$user")
        and conn.execute("select has_schema_privilege(%s, 'create')", (name,)).fetchone()[0]
    )
    for schema in schemas:
        s = sql.Identifier(schema).as_string(conn)
        for name, args, result, body in HOSTILE_FUNCTIONS:
            try:
                with conn.transaction():
                    conn.execute(
                        f"create function {s}.{name}({args}) returns {result} language plpgsql as "
                        f"$f$ begin perform public.ragsql_pwned('{schema}.{name}({args})'); {body} end $f$"
                    )
            except psycopg.errors.DuplicateFunction:
                pass  # an extension's own function of that name (intarray's sort where it was put in public)
        for statement in HOSTILE_OTHERS:
            conn.execute(statement.format(s=s))
    for statement in HOSTILE_TEMP:
        conn.execute(statement)
    conn.commit()


def _definer_functions(conn: psycopg.Connection) -> list[tuple]:
    """Every security definer function outside pg_catalog: oid, schema, name, argument names and types, how many
    have defaults, and whether it returns a trigger."""
    return conn.execute("""
        select p.oid, n.nspname, p.proname,
               coalesce(p.proargnames[1:p.pronargs], array_fill(''::text, array[p.pronargs])),
               array(select format_type(t, null) from unnest(p.proargtypes) as t),
               p.pronargdefaults, p.prorettype = 'trigger'::regtype
        from pg_proc as p
        join pg_namespace as n on n.oid = p.pronamespace
        where p.prosecdef and n.nspname not in ('pg_catalog', 'information_schema')
        order by n.nspname, p.proname, p.oid""").fetchall()


def _argument(function: str, name: str, type_: str, ids: dict[str, int]):
    """A plausible value for an argument, by its name and type (null when nothing better is known)."""
    floats = type_ == "double precision[]"
    by_name = {
        "run": "ex",
        "run_a": "ex",
        "run_b": "ex2",
        "baseline": "ex2",
        "dataset": "ex",
        "runs": ["ex", "ex2"],
        "measure": "nDCG@10",
        "name": "nDCG@10",
        "measures": ["nDCG@10", "P@5"],
        "metric": {"text_metric": "token_f1", "context_id_metric": "id_based_context_recall"}.get(
            function, "faithfulness"
        ),
        "aspect": "harmfulness",
        "model": "offline",
        "p_values": [0.01, 0.04, 0.03],
        "vals": [0.1, -0.2, 0.3, 0.4, -0.1, 0.2],
        "lengths": [3, 3],
        "a": [0.1, 0.5, 0.2, 0.9] if floats else ["1", "0", "1"],
        "b": [0.2, 0.4, 0.3, 0.8] if floats else ["1", "1", "0"],
        "mean": 0.1,
        "sd": 0.2,
        "n": 5,
        "sample": 3,
        "resamples": 200,
        "version_id": ids["version"],
        "dimensions": 384,
        "run_id": ids["run"],
        "run_ids": [ids["run"] + 1000],
    }
    return by_name.get(name)


def _fire(conn: psycopg.Connection, oid: int, label: str) -> dict[str, psycopg.Error | None]:
    """Fires a trigger function through each trigger on delete or update that calls it (it cannot be called
    directly): deletes, or updates unchanged, every row of the trigger's table; returns the error of each."""
    outcome = {}
    for table, delete in conn.execute(
        """
            select t.tgrelid::regclass::text, t.tgtype & 8 <> 0 from pg_trigger as t
            where t.tgfoid = %s and t.tgtype & (8 | 16) <> 0""",
        (oid,),
    ).fetchall():
        column = conn.execute(
            "select quote_ident(attname) from pg_attribute where attrelid = %s::regclass "
            "and attnum > 0 and not attisdropped order by attnum limit 1",
            (table,),
        ).fetchone()[0]
        statement = f"delete from {table}" if delete else f"update {table} set {column} = {column}"
        try:
            with conn.transaction() as savepoint:
                conn.execute(statement)
                raise psycopg.Rollback(savepoint)  # each call sees the fixture as it was
            outcome[f"{label} via {statement}"] = None
        except psycopg.Error as exc:
            outcome[f"{label} via {statement}"] = exc
    return outcome


def _call_every_definer_function(conn: psycopg.Connection) -> tuple[dict[str, psycopg.Error | None], set[str]]:
    """Calls each security definer function (required arguments, and resamples) in a savepoint, a trigger function
    through its triggers; returns the error of each call, or None, and the trigger functions."""
    ids = {
        "version": conn.execute("select max(id) from ragsql.corpus_version").fetchone()[0] or 1,
        "run": conn.execute("select id from ragsql.run where name = 'ex'").fetchone()[0],
    }
    outcome, triggers = {}, set()
    for oid, schema, name, names, types, defaults, trigger in _definer_functions(conn):
        label = conn.execute("select %s::regprocedure::text", (oid,)).fetchone()[0]
        if trigger:
            triggers.add(label)
            outcome.update(_fire(conn, oid, label))
            continue
        required = len(types) - defaults
        args = [sql.SQL("%s::{}").format(sql.SQL(t)) for t in types[:required]]
        values = [_argument(name, n, t, ids) for n, t in zip(names[:required], types[:required])]
        if "resamples" in names[required:]:  # kept small: the resampling functions run in well under a second
            args.append(sql.SQL("resamples => %s::integer"))
            values.append(_argument(name, "resamples", "integer", ids))
        query = sql.SQL("select * from {}({})").format(sql.Identifier(schema, name), sql.SQL(", ").join(args))
        try:
            with conn.transaction() as savepoint:
                conn.execute(query, values)
                raise psycopg.Rollback(savepoint)
            outcome[label] = None
        except psycopg.Error as exc:
            outcome[label] = exc
    return outcome, triggers


@pytest.mark.parametrize("group", ["ragsql_reader", "ragsql_writer"])
def test_objects_planted_on_a_writable_path_never_run_as_the_owner(fixture_url, group):
    """As a member of ragsql_reader and of ragsql_writer, with public writable: functions, operators and aggregates
    shadowing pg_catalog's in public (and every other schema on a ragsql function's search_path the login may
    create in), and pgvector's type names in pg_temp, never run while any security definer function is called."""
    with _member(fixture_url, group) as url, psycopg.connect(url) as conn:
        conn.execute("set statement_timeout = '20s'")
        _plant(conn)
        outcome, triggers = _call_every_definer_function(conn)
        conn.rollback()
        pwned = conn.execute("select is_called from public.ragsql_pwned_seq").fetchone()[0]
        conn.rollback()
    assert len(outcome) > 50
    ran = {label: str(exc).splitlines()[0] for label, exc in outcome.items() if exc and "pwned" in str(exc)}
    assert not ran and not pwned, ran
    # the wrappers' pinned path still finds every name their functions use
    unresolved = {
        label: str(exc).splitlines()[0]
        for label, exc in outcome.items()
        if exc is not None and exc.sqlstate in UNRESOLVED and label.startswith("ragsql_report.")
    }
    assert not unresolved, unresolved
    if group == "ragsql_writer":
        # the writer's statements fired every security definer trigger function (a reader may not delete)
        fired = {label.partition(" via ")[0] for label, exc in outcome.items() if " via " in label and exc is None}
        assert triggers and fired == triggers
    if group == "ragsql_reader":
        # the owner-only functions (schema ragsql's) are refused to a reader
        owner_only = {
            label: exc for label, exc in outcome.items() if label.startswith("ragsql.") and " via " not in label
        }
        allowed = {
            label for label, exc in owner_only.items() if not isinstance(exc, psycopg.errors.InsufficientPrivilege)
        }
        assert owner_only and not allowed, allowed


def test_no_function_of_ragsql_is_executable_by_public(fixture_url):
    """PUBLIC may execute no function or procedure of schemas ragsql and ragsql_report (beyond an explicit
    allowlist, empty), and ragsql_reader no security definer function of schema ragsql."""
    with psycopg.connect(fixture_url) as conn:
        public = {
            label
            for (label,) in conn.execute("""
            select p.oid::regprocedure::text from pg_proc as p
            where p.pronamespace in ('ragsql'::regnamespace, 'ragsql_report'::regnamespace)
              and has_function_privilege('public', p.oid, 'execute')""")
        }
        reader = {
            label
            for (label,) in conn.execute("""
            select p.oid::regprocedure::text from pg_proc as p
            where p.pronamespace = 'ragsql'::regnamespace and p.prosecdef
              and has_function_privilege('ragsql_reader', p.oid, 'execute')""")
        }
    assert public == PUBLIC_EXECUTE
    assert not reader, reader


def test_definer_paths_hold_only_schemas_no_other_role_may_create_in(fixture_url):
    """Every security definer function pins search_path, with pg_temp last, to schemas in which neither PUBLIC nor
    ragsql_reader nor ragsql_writer may create anything."""
    with psycopg.connect(fixture_url) as conn:
        rows = conn.execute("""
            select p.oid::regprocedure::text,
                   (select substr(c, length('search_path=') + 1) from unnest(p.proconfig) as c
                    where c like 'search_path=%')
            from pg_proc as p join pg_namespace as n on n.oid = p.pronamespace
            where p.prosecdef and n.nspname not in ('pg_catalog', 'information_schema')""").fetchall()
        assert rows
        bad = {}
        for label, path in rows:
            schemas = [s.strip().strip('"') for s in (path or "").split(",")]
            if path is None or schemas[0] != "pg_catalog" or schemas[-1] != "pg_temp":
                bad[label] = path
                continue
            for schema in schemas[:-1]:
                writable = conn.execute(
                    "select r from unnest(array['public', 'ragsql_reader', 'ragsql_writer']) as r "
                    "where has_schema_privilege(r, %s, 'create')",
                    (schema,),
                ).fetchall()
                if writable:
                    bad[label] = f"{path}: {schema} writable by {writable}"
    assert not bad, bad


def test_reader_gets_the_pgvector_statistics_through_the_pinned_path(fixture_url):
    """The wrappers whose functions use pgvector (bootstrap intervals, sign-flip tests, embedding cosines) give a
    reader what ragsql's functions give the owner, with pgvector's schema absent from their search_path."""
    queries = [
        "select * from {}.bootstrap_mean_ci(array[0.1, 0.4, 0.3, 0.9, 0.2], array[2, 3], 500)",
        "select * from {}.sign_flip_p(array[0.1, -0.4, 0.3, 0.9, 0.2, 0.05, -0.1], array[3, 4], 500)",
        "select * from {}.answer_similarity('ex') order by qid",
        "select * from {}.measure_ci('ex', array['nDCG@10'], 300)",
    ]
    with (
        _member(fixture_url, "ragsql_reader") as url,
        psycopg.connect(url) as reader,
        psycopg.connect(fixture_url) as owner,
    ):
        for query in queries:
            expected = owner.execute(query.format("ragsql")).fetchall()
            assert expected and any(v is not None for row in expected for v in row[1:]), query
            assert reader.execute(query.format("ragsql_report")).fetchall() == expected, query
