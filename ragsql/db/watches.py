"""Watches of production log tables (ragsql.watch, ragsql.watch_window): the catalog checks of a source, the
watch's row, its windows' runs, the capture's watermark and which windows still need judging."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from ragsql.db import catalog, load, names
from ragsql.db.connect import shard_reads_in_sequence
from ragsql.db.rows import dict_rows, one, typed_rows, value
from ragsql.errors import InputError

__all__ = [
    "CHANNEL",
    "Columns",
    "OVER_BUDGET",
    "Watch",
    "add",
    "add_trigger",
    "bought",
    "advance",
    "check_source",
    "count",
    "drop",
    "expire",
    "get",
    "judged",
    "list_watches",
    "listen",
    "lock",
    "new_rows",
    "run_name",
    "set_paused",
    "skip_over_budget",
    "split_source",
    "to_judge",
    "trigger_of",
    "unfinished",
    "unlock",
    "window_run",
    "windows",
    "WINDOWS",
]

CHANNEL = "ragsql_watch"  # what a watch's trigger notifies (the payload: the watch's name), and --follow listens to
OVER_BUDGET = "budget spent"  # how the reason of a row left unjudged by the window's budget starts
WINDOWS = {"1h": timedelta(hours=1), "1d": timedelta(days=1)}
_TEXT = "a text type (text, varchar)"


@dataclass(frozen=True)
class Columns:
    """The source's columns a watch reads (None: not mapped)."""

    key: str
    time: str
    question: str
    answer: str
    contexts: str | None = None
    reference: str | None = None
    retrieved: str | None = None


@dataclass(frozen=True)
class Watch:
    """One row of ragsql.watch."""

    id: int
    name: str
    source_schema: str
    source_table: str
    key_column: str
    time_column: str
    question_column: str
    answer_column: str
    contexts_column: str | None
    reference_column: str | None
    sample: float
    window_size: timedelta
    settle: timedelta
    metrics: list[str] | None
    judge: str | None
    paused: bool
    starts_at: datetime | None
    captured_until: datetime | None
    budget: int | None = None
    keep: timedelta | None = None
    retrieved_column: str | None = None

    @property
    def source(self) -> str:
        return f"{self.source_schema}.{self.source_table}"

    @property
    def columns(self) -> Columns:
        return Columns(
            self.key_column,
            self.time_column,
            self.question_column,
            self.answer_column,
            self.contexts_column,
            self.reference_column,
            self.retrieved_column,
        )


_FIELDS = sql.SQL(", ").join(sql.Identifier("w", name) for name in Watch.__dataclass_fields__)


def split_source(source: str) -> tuple[str, str]:
    """(schema, table) of SCHEMA.TABLE, or of TABLE in schema public."""
    schema, _, table = source.rpartition(".")
    if not table.strip():
        raise InputError(f"--source {source!r}: name a table or view as SCHEMA.TABLE")
    return schema or "public", table


def check_source(conn: psycopg.Connection, schema: str, table: str, columns: Columns, watch: str) -> None:
    """An InputError (one line) unless the source exists, is readable by this role, is not distributed by Citus,
    and has every mapped column with a type the watch can read."""
    where = f"{schema}.{table}"
    found = conn.execute(
        """
        select c.oid, c.relkind, has_schema_privilege(c.relnamespace, 'USAGE')
        from pg_class as c join pg_namespace as n on n.oid = c.relnamespace
        where n.nspname = %s and c.relname = %s and c.relkind in ('r', 'p', 'v', 'm', 'f')
        """,
        (schema, table),
    ).fetchone()
    if found is None:
        raise InputError(f"watch {watch}: no table or view {where}")
    oid, _, usable = found
    if (
        value(conn.execute("select to_regclass('pg_catalog.pg_dist_partition') is not null"))
        and conn.execute("select from pg_dist_partition where logicalrelid = %s", (oid,)).fetchone()
    ):
        raise InputError(f"watch {watch}: {where} is distributed by Citus: a watch reads a table of one server")
    types = {
        name: (typ, category, element)
        for name, typ, category, element in conn.execute(
            """
            select a.attname, format_type(a.atttypid, null), t.typcategory, coalesce(e.typcategory, '')
            from pg_attribute as a
            join pg_type as t on t.oid = a.atttypid
            left join pg_type as e on e.oid = t.typelem and t.typcategory = 'A'
            where a.attrelid = %s and a.attnum > 0 and not a.attisdropped
            """,
            (oid,),
        )
    }
    wanted = [(f"--{option}", getattr(columns, option)) for option in Columns.__dataclass_fields__]
    for option, column in wanted:
        if column is None:
            continue
        if column not in types:
            raise InputError(f'watch {watch}: {where} has no column "{column}" ({option})')
        typ, category, element = types[column]
        if option == "--time" and typ not in ("timestamp with time zone", "timestamp without time zone"):
            raise InputError(f'watch {watch}: {option} column "{column}" of {where} is {typ}: use a timestamptz')
        if option in ("--question", "--answer", "--reference") and category != "S":
            raise InputError(f'watch {watch}: {option} column "{column}" of {where} is {typ}: use {_TEXT}')
        if option in ("--contexts", "--retrieved") and not (
            category == "S" or typ in ("json", "jsonb") or element == "S"
        ):
            raise InputError(
                f'watch {watch}: {option} column "{column}" of {where} is {typ}: use text[], jsonb (an array) or text'
            )
    readable = usable and all(
        value(conn.execute("select has_column_privilege(%s, %s, 'SELECT')", (oid, column)))
        for _, column in wanted
        if column is not None
    )
    if not readable:
        raise InputError(
            f"watch {watch}: role {conn.info.parameter_status('session_authorization') or 'of this session'} "
            f"may not read {where} (grant it USAGE on schema {schema} and SELECT on the table)"
        )


def add(
    conn: psycopg.Connection,
    name: str,
    source: str,
    columns: Columns,
    *,
    sample: float,
    window: str,
    settle: timedelta,
    metrics: list[str] | None,
    judge: str | None,
    backfill: bool,
    budget: int | None = None,
    keep: timedelta | None = None,
    trigger: bool = False,
) -> Watch:
    """Store a watch (with `trigger`, and its trigger on the source); nothing is stored when a check fails."""
    schema, table = split_source(source)
    check_source(conn, schema, table, columns, name)
    if conn.execute("select from ragsql.watch where name = %s", (name,)).fetchone():
        raise InputError(f'watch "{name}" already exists (ragsql watch drop {name} --yes, or pick another name)')
    with conn.cursor(row_factory=class_row(Watch)) as cur:
        cur.execute(
            sql.SQL("""
            insert into ragsql.watch as w (
                name, source_schema, source_table, key_column, time_column, question_column,
                answer_column, contexts_column, reference_column, sample, window_size, settle, metrics, judge,
                starts_at, captured_xmin, budget, keep, retrieved_column)
            values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                    case when %s then null else now() end,
                    case when %s then null else pg_snapshot_xmin(pg_current_snapshot()) end, %s, %s, %s)
            returning {}
            """).format(_FIELDS),
            (
                name,
                schema,
                table,
                columns.key,
                columns.time,
                columns.question,
                columns.answer,
                columns.contexts,
                columns.reference,
                sample,
                WINDOWS[window],
                settle,
                metrics,
                judge,
                backfill,
                backfill,
                budget,
                keep,
                columns.retrieved,
            ),
        )
        watch = one(cur)
    if trigger:
        add_trigger(conn, watch)
    return watch


def _trigger_name(watch: str) -> str:
    """The name of the watch's trigger: ragsql_watch_NAME, or a hash of NAME where that is too long."""
    name = f"ragsql_watch_{watch}"
    return name if len(name.encode()) <= 63 else f"ragsql_watch_{hashlib.sha256(watch.encode()).hexdigest()[:16]}"


def add_trigger(conn: psycopg.Connection, watch: Watch) -> None:
    """Attach ragsql.watch_notify to the watch's source table (after insert, once per statement); an InputError
    (one line) for a view, or for a role without the TRIGGER privilege on the table."""
    kind = value(
        conn.execute(
            "select c.relkind from pg_class as c join pg_namespace as n on n.oid = c.relnamespace "
            "where n.nspname = %s and c.relname = %s",
            (watch.source_schema, watch.source_table),
        )
    )
    if kind not in ("r", "p"):
        raise InputError(
            f"watch {watch.name}: --trigger needs a table, and {watch.source} is a view or foreign table "
            "(add the watch without --trigger: it is polled every --interval)"
        )
    try:
        with conn.transaction():
            conn.execute(
                sql.SQL(
                    "create trigger {} after insert on {}.{} "
                    "for each statement execute function ragsql.watch_notify({})"
                ).format(
                    sql.Identifier(_trigger_name(watch.name)),
                    sql.Identifier(watch.source_schema),
                    sql.Identifier(watch.source_table),
                    sql.Literal(watch.name),
                )
            )
    except psycopg.errors.InsufficientPrivilege:
        raise InputError(
            f"watch {watch.name}: --trigger: this role may not add a trigger to {watch.source} (grant it TRIGGER on "
            "the table, or add the watch without --trigger: polling needs only SELECT)"
        ) from None


def trigger_of(conn: psycopg.Connection, watch: Watch) -> str | None:
    """The name of the watch's trigger on its source, or None."""
    found = conn.execute(
        """
        select g.tgname from pg_trigger as g
        join pg_class as c on c.oid = g.tgrelid join pg_namespace as n on n.oid = c.relnamespace
        where n.nspname = %s and c.relname = %s and g.tgname = %s
          and g.tgfoid = 'ragsql.watch_notify()'::regprocedure
        """,
        (watch.source_schema, watch.source_table, _trigger_name(watch.name)),
    ).fetchone()
    return None if found is None else found[0]


def get(conn: psycopg.Connection, name: str) -> Watch:
    """The watch of that name; an InputError listing the watches when there is none."""
    found = typed_rows(
        conn, Watch, sql.SQL("select {} from ragsql.watch as w where w.name = %s").format(_FIELDS), (name,)
    )
    if found:
        return found[0]
    known = [r[0] for r in conn.execute('select name from ragsql.watch order by name collate "C"')]
    raise names.unknown("watch", name, known)  # the message every unknown name gets


def list_watches(conn: psycopg.Connection) -> list[dict]:
    """Every watch with its source, sample, window, state and how many rows its windows hold."""
    return dict_rows(
        conn,
        """
        select w.name, w.source_schema || '.' || w.source_table as source, w.sample,
               case when w.window_size = interval '1 day' then '1d' else '1h' end as window,
               case when w.paused then 'paused' else 'active' end as state, w.budget,
               count(ww.run_id) as windows, coalesce(sum(ww.captured), 0)::bigint as captured,
               coalesce(sum(ww.judged), 0)::bigint as judged, w.captured_until as last_capture
        from ragsql.watch as w
        left join ragsql.watch_window as ww on ww.watch_id = w.id
        group by w.id
        order by w.name collate "C"
        """,
    )


def windows(conn: psycopg.Connection, watch_id: int) -> list[dict]:
    """The watch's windows, oldest first: start, run, rows captured, skipped and judged, and whether closed."""
    return dict_rows(
        conn,
        """
        select ww.window_start, r.name as run, ww.captured, ww.skipped, ww.judged,
               ww.window_start + w.window_size + w.settle <= now() as closed,
               (select count(*) from ragsql.query as q
                where q.dataset_id = r.dataset_id and q.metadata ->> 'skipped' like %s) as over_budget
        from ragsql.watch_window as ww
        join ragsql.watch as w on w.id = ww.watch_id
        join ragsql.run as r on r.id = ww.run_id
        where ww.watch_id = %s
        order by ww.window_start
        """,
        (OVER_BUDGET + "%", watch_id),
    )


def set_paused(conn: psycopg.Connection, name: str, paused: bool) -> None:
    """Pause or resume a watch (a paused one captures and judges nothing; resumed, it catches up)."""
    get(conn, name)
    conn.execute("update ragsql.watch set paused = %s where name = %s", (paused, name))


def drop(conn: psycopg.Connection, name: str, runs: bool) -> int:
    """Delete a watch (and its trigger); with `runs` its windows' datasets and runs too. How many windows it had."""
    watch = get(conn, name)
    if (trigger := trigger_of(conn, watch)) is not None:
        try:
            with conn.transaction():
                conn.execute(
                    sql.SQL("drop trigger {} on {}.{}").format(
                        sql.Identifier(trigger), sql.Identifier(watch.source_schema), sql.Identifier(watch.source_table)
                    )
                )
        except psycopg.errors.InsufficientPrivilege:
            raise InputError(
                f"watch drop {name}: its trigger {trigger} on {watch.source} is dropped by the table's owner only "
                "(drop the watch as that role); nothing was dropped"
            ) from None
    count = value(conn.execute("select count(*) from ragsql.watch_window where watch_id = %s", (watch.id,)))
    if runs:
        conn.execute(
            "delete from ragsql.dataset where id in (select r.dataset_id from ragsql.watch_window as ww "
            "join ragsql.run as r on r.id = ww.run_id where ww.watch_id = %s)",
            (watch.id,),
        )
    conn.execute("delete from ragsql.watch where id = %s", (watch.id,))
    return count


_LOCK_CLASS = 0x7261_7773  # the first key of the two-key advisory lock a capture holds


def lock(conn: psycopg.Connection, watch_id: int) -> None:
    """Wait until no other session captures the watch, then hold it off until `unlock` (or the session ends)."""
    conn.execute("select pg_advisory_lock(%s, %s)", (_LOCK_CLASS, watch_id))


def unlock(conn: psycopg.Connection, watch_id: int) -> None:
    """Let the next capture of the watch go."""
    conn.execute("select pg_advisory_unlock(%s, %s)", (_LOCK_CLASS, watch_id))


def new_rows(conn: psycopg.Connection, watch_id: int, chunk: int = 1000):
    """The rows the next capture stores (ragsql._watch_new_rows), in lists of up to `chunk` rows; read through a
    cursor of the caller's transaction, whose snapshot they are."""
    with conn.cursor(name="ragsql_watch_rows") as cur:
        cur.execute("select * from ragsql._watch_new_rows(%s)", (watch_id,))
        while rows := cur.fetchmany(chunk):
            yield rows


def run_name(watch: str, start: datetime) -> str:
    """`NAME@<window start>`, the start in UTC."""
    return f"{watch}@{start.astimezone(timezone.utc).strftime('%Y-%m-%dT%H:%MZ')}"


def window_run(conn: psycopg.Connection, watch: Watch, start: datetime) -> tuple[int, int]:
    """(run id, dataset id) of the watch's window starting at `start`: both named NAME@<start>, created (with the
    window's row) when new; a dataset of that name that is not the window's is an InputError."""
    found = conn.execute(
        "select r.id, r.dataset_id from ragsql.watch_window as ww join ragsql.run as r on r.id = ww.run_id "
        "where ww.watch_id = %s and ww.window_start = %s",
        (watch.id, start),
    ).fetchone()
    if found is not None:
        return found[0], found[1]
    name = run_name(watch.name, start)
    if conn.execute("select from ragsql.dataset where name = %s", (name,)).fetchone():
        raise InputError(f'a dataset "{name}" exists already: watch {watch.name} needs that name for a window')
    dataset_id = load.ensure_dataset(conn, name, f"rows of {watch.source} captured by watch {watch.name}")
    config = {
        "source": "watch",
        "watch": watch.name,
        "table": watch.source,
        "window_start": start.astimezone(timezone.utc).isoformat(),
    }
    run_id = load.create_run(conn, name, dataset_id, config)
    conn.execute(
        "insert into ragsql.watch_window (watch_id, window_start, run_id) values (%s, %s, %s)",
        (watch.id, start, run_id),
    )
    return run_id, dataset_id


def count(conn: psycopg.Connection, watch_id: int, start: datetime, captured: int, skipped: int) -> None:
    """Add a capture's rows to its window's counts."""
    conn.execute(
        "update ragsql.watch_window set captured = captured + %s, skipped = skipped + %s "
        "where watch_id = %s and window_start = %s",
        (captured, skipped, watch_id, start),
    )


def advance(conn: psycopg.Connection, watch_id: int) -> None:
    """Record this capture's watermark: its snapshot's oldest running transaction and its time."""
    conn.execute(
        "update ragsql.watch set captured_xmin = pg_snapshot_xmin(pg_current_snapshot()), captured_until = now() "
        "where id = %s",
        (watch_id,),
    )


def to_judge(conn: psycopg.Connection, watch_id: int) -> list[tuple[str, int, int]]:
    """(run, run id, rows captured) of the watch's windows whose rows are not all judged, oldest first."""
    return conn.execute(
        """
        select r.name, ww.run_id, ww.captured
        from ragsql.watch_window as ww join ragsql.run as r on r.id = ww.run_id
        where ww.watch_id = %s and ww.judged < ww.captured
        order by ww.window_start
        """,
        (watch_id,),
    ).fetchall()


def unfinished(conn: psycopg.Connection, run_id: int) -> int:
    """Answers of the run with no judge task, or with one not done (pending, running or failed)."""
    return value(
        conn.execute(
            """
            select count(*) from ragsql.answer as a
            left join (select t.query_id, bool_and(t.status = 'done') as done
                       from ragsql.judge_task as t where t.run_id = %s group by t.query_id) as t
                   on t.query_id = a.query_id
            where a.run_id = %s and t.done is not true
            """,
            (run_id, run_id),
        )
    )


def judged(conn: psycopg.Connection, run_id: int, rows: int) -> None:
    """Record that the window's first `rows` captured rows are judged."""
    conn.execute("update ragsql.watch_window set judged = greatest(judged, %s) where run_id = %s", (rows, run_id))


def bought(conn: psycopg.Connection, run_id: int) -> int:
    """Places of the window's call budget taken by every process so far: calls bought, in flight, or held by a process
    that died (what its budget counts)."""
    return value(conn.execute("select ragsql._calls_reserved(%s)", (run_id,)))


def skip_over_budget(conn: psycopg.Connection, run_id: int, budget: int) -> int:
    """Mark the run's answered rows whose judge tasks are not all done (none running) as skipped, their reason the
    spent budget; how many were marked."""
    # two statements: on Citus an update of a reference table (query) may read no distributed table (answer,
    # judge_task), so the rows are chosen first from the run's answers and tasks; read in sequence, or Citus
    # refuses the update after a parallel read in the same transaction
    shard_reads_in_sequence(conn)
    chosen = [
        query_id
        for (query_id,) in conn.execute(
            """
            select a.query_id from ragsql.answer as a
            where a.run_id = %s
              and not exists (select from ragsql.judge_task as t
                              where t.run_id = a.run_id and t.query_id = a.query_id and t.status = 'running')
              and (not exists (select from ragsql.judge_task as t
                               where t.run_id = a.run_id and t.query_id = a.query_id)
                   or exists (select from ragsql.judge_task as t
                              where t.run_id = a.run_id and t.query_id = a.query_id and t.status <> 'done'))
            """,
            (run_id,),
        )
    ]
    if not chosen:
        return 0
    return conn.execute(
        "update ragsql.query set metadata = coalesce(metadata, '{}') || jsonb_build_object('skipped', %s::text) "
        "where id = any(%s) and metadata ->> 'skipped' is null",
        (f"{OVER_BUDGET}: the window's {budget} judge calls were bought", chosen),
    ).rowcount


def expire(conn: psycopg.Connection, watch: Watch) -> list[str]:
    """Delete the dataset (and with it the run) of every window of the watch that started longer ago than its
    `keep`, each as `ragsql delete dataset` does; their names, oldest first."""
    if watch.keep is None:
        return []
    old = [
        name
        for (name,) in conn.execute(
            "select r.name from ragsql.watch_window as ww join ragsql.run as r on r.id = ww.run_id "
            "where ww.watch_id = %s and ww.window_start < now() - %s order by ww.window_start",
            (watch.id, watch.keep),
        )
    ]
    for name in old:
        catalog.delete(conn, "dataset", name)  # the window's dataset and run share its name
    return old


async def listen(url: str) -> psycopg.AsyncConnection:
    """An autocommit connection listening on CHANNEL: where `watch run --follow` waits for a trigger's wake-up."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True, application_name="ragsql watch")
    await conn.execute(sql.SQL("listen {}").format(sql.Identifier(CHANNEL)))
    return conn
