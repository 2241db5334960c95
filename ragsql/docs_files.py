"""The reference pages of the docs site, written by `python -m ragsql.docs_files` from their sources:
docs/reference/cli.md from the command table (ragsql.cli.COMMANDS) and each command's own help, and
docs/reference/sql.md from the catalog's `comment on` texts of an installed database (the embedded default, or
RAGSQL_DATABASE_URL). Tests fail when a page is stale (tests/test_docs_reference.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    import psycopg

__all__ = ["CLI_PAGE", "SQL_PAGE", "cli_reference", "sql_reference"]

ROOT = Path(__file__).resolve().parents[1]
CLI_PAGE = "docs/reference/cli.md"
SQL_PAGE = "docs/reference/sql.md"
WIDTH = 100  # the help's wrapping width, fixed so that the page does not depend on the terminal that wrote it


def _help(command: click.Command, path: list[str]) -> str:
    """The command's `--help` text as `ragsql PATH --help` prints it, at a fixed width."""
    from ragsql.cli import cli

    # the group's settings (-h as well as --help): click keeps a command's help option once made, so a page
    # written without them would differ from the one written after a command ran in the same process
    settings = {"help_option_names": cli.context_settings["help_option_names"]}
    info_name = path[-1]
    parent = None
    for name in path[:-1]:
        parent = click.Context(click.Command(name), info_name=name, parent=parent, **settings)
    ctx = click.Context(
        command, info_name=info_name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH, **settings
    )
    return command.get_help(ctx)


def _sections(command: click.Command, path: list[str], summary: str) -> list[str]:
    out = [
        f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`",
        "",
        summary,
        "",
        "```text",
        _help(command, path),
        "```",
        "",
    ]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            sub = command.commands[name]
            out += _sections(sub, [*path, name], sub.get_short_help_str(limit=WIDTH))
    return out


def cli_reference() -> str:
    """docs/reference/cli.md: every command of the command table, in its order, with its help."""
    from ragsql.cli import COMMANDS, cli
    from ragsql.errors import EXIT_CODES

    lines = [
        "# CLI reference",
        "",
        "<!-- Written by `python -m ragsql.docs_files` from ragsql/cli (the command table and each command's"
        " help): edit those, not this file. -->",
        "",
        "Every command, in the order of the workflow, with the help `ragsql COMMAND --help` prints.",
        "",
        "## Exit codes",
        "",
        "| exit code | meaning |",
        "|---:|---|",
        *(f"| {code} | {meaning} |" for code, meaning in EXIT_CODES.items()),
        "",
    ]
    for name, (_, _, summary) in COMMANDS.items():
        ctx = click.Context(cli, info_name="ragsql")
        command = cli.get_command(ctx, name)
        assert command is not None, name
        lines += _sections(command, ["ragsql", name], summary)
    return "\n".join(lines).rstrip() + "\n"


OBJECTS = """
select * from (
select case p.prokind when 'p' then 'procedure' else 'function' end as kind,
       p.proname as name,
       pg_get_function_identity_arguments(p.oid) as args,
       coalesce(pg_get_function_result(p.oid), '') as result,
       coalesce(d.description, '') as comment
from pg_proc as p
join pg_namespace as n on n.oid = p.pronamespace
left join pg_description as d on d.objoid = p.oid and d.classoid = 'pg_proc'::regclass and d.objsubid = 0
where n.nspname = 'ragsql' and p.proname not like '\\_%' and p.prokind in ('f', 'p')
  and not exists (select from pg_depend as e where e.objid = p.oid and e.deptype = 'e')
union all
select case c.relkind when 'v' then 'view' else 'table' end, c.relname, '', '', coalesce(d.description, '')
from pg_class as c
join pg_namespace as n on n.oid = c.relnamespace
left join pg_description as d on d.objoid = c.oid and d.classoid = 'pg_class'::regclass and d.objsubid = 0
where n.nspname = 'ragsql' and c.relkind in ('v', 'r', 'p') and c.relname not like '\\_%' and not c.relispartition
) as o
order by kind, name collate "C", args collate "C"
"""

TITLES = {"function": "Functions", "procedure": "Procedures", "view": "Views", "table": "Tables"}


def sql_reference(conn: psycopg.Connection) -> str:
    """docs/reference/sql.md: the public functions, views and tables of schema ragsql with their comments."""
    rows = conn.execute(OBJECTS).fetchall()
    lines = [
        "# SQL reference",
        "",
        "<!-- Written by `python -m ragsql.docs_files` from the `comment on` texts of an installed database (sql/):"
        " edit those, not this file. -->",
        "",
        "Everything lives in schema `ragsql`; `\\df+ ragsql.*` and `\\dv+ ragsql.*` in psql show the same texts"
        " with each formula. Names starting with `_` are internal and left out. Readers (`ragsql_reader`) call the"
        " functions and views of the same names in schema `ragsql_report` (see [SQL for DBAs](../guides/sql.md)).",
        "",
    ]
    for kind in ("function", "view", "table", "procedure"):
        group = [r for r in rows if r[0] == kind]
        if not group:
            continue
        lines += [f"## {TITLES[kind]}", ""]
        for _, name, args, result, comment in group:
            signature = f"ragsql.{name}({args})" if kind in ("function", "procedure") else f"ragsql.{name}"
            lines += [f"### `{signature}`", ""]
            if result:
                lines += [f"Returns `{' '.join(result.split())}`.", ""]
            lines += [comment.strip() or "*(no comment)*", ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    from ragsql import db

    pages = {CLI_PAGE: cli_reference()}
    with db.connect() as conn:
        db.ensure_schema(conn)
        pages[SQL_PAGE] = sql_reference(conn)
    for path, text in pages.items():
        target = ROOT / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
