"""The files derived from the metric registry (ragsql/registry.py), written by `python -m ragsql.registry_files`:
sql/functions/29_metric_registry.sql (the rows of ragsql.generation_metric and ragsql._metric_calls, each metric's
call) and docs/metrics.md (the metric reference); it then refreshes sql/install.sql's
fingerprint. A test fails when a file is stale."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ragsql.registry import INPUTS, MEASURES, METRICS, Metric

__all__ = ["FILES", "metrics_doc", "registry_sql"]

ROOT = Path(__file__).resolve().parents[1]
HEADER = "-- Written by `python -m ragsql.registry_files` from ragsql/registry.py: edit that, not this file.\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _rows() -> str:
    rows = [
        f"    ({_quote(m.name)}, {position}, {_quote(m.task) if m.task else 'null'}, "
        f"{'true' if 'reference' in m.needs else 'false'}, {'true' if m.higher_is_better else 'false'},\n"
        f"     {_quote(m.computed_by) if m.computed_by else 'null'},\n     {_quote(m.description)})"
        for position, m in enumerate((m for m in METRICS if not m.template), 1)
    ]
    return ",\n".join(rows)


def _calls() -> str:
    groups: dict[str, list[Metric]] = {}
    for m in METRICS:
        groups.setdefault(m.sql, []).append(m)
    rows = []
    for call, group in groups.items():
        templates = [m for m in group if m.template]
        # a family with user-added members is matched by its prefix, the others by their names
        names = "null" if templates else f"array[{', '.join(_quote(m.name) for m in group)}]"
        prefix = _quote(templates[0].name.split("<", 1)[0]) if templates else "null"
        rows.append(f"        ({names}, {prefix}, {_quote(call)})")
    return ",\n".join(rows)


def _functions() -> str:
    """The functions the calls name, each once, in the order of their first call."""
    names = dict.fromkeys(m.sql.split("(", 1)[0].removeprefix("ragsql.") for m in METRICS)
    return ", ".join(_quote(name) for name in names)


def registry_sql() -> str:
    """sql/functions/29_metric_registry.sql."""
    return f"""{HEADER}
-- The built-in generation metrics, as the registry declares them, at positions 1..999 (a rubric of `ragsql rubric
-- add` adds its own row at 1001 and up). Their positions are set aside first, so that a metric declared between two
-- others moves them without a clash of the unique position; a built-in the registry no longer declares goes.
update ragsql.generation_metric set position = -position where position between 1 and 999;
insert into ragsql.generation_metric
    (metric, position, task_kind, needs_reference, higher_is_better, computed_by, description)
values
{_rows()}
on conflict (metric) do update
set position = excluded.position, task_kind = excluded.task_kind, needs_reference = excluded.needs_reference,
    higher_is_better = excluded.higher_is_better, computed_by = excluded.computed_by,
    description = excluded.description;
delete from ragsql.generation_metric where position < 0;

-- Each metric's own function, as the registry declares the call (ragsql._evaluate_generation runs it).
create or replace function ragsql._metric_calls()
returns table (names text[], prefix text, call text)
language sql immutable parallel safe
as $$
    select * from (values
{_calls()}
    ) as c(names, prefix, call)
$$;
comment on function ragsql._metric_calls() is
    'The SQL call computing each generation metric, as ragsql/registry.py declares it: for the metrics named, or '
    'for every metric starting with prefix (a family whose members users add).';

create or replace function ragsql._metric_functions()
returns text[]
language sql immutable parallel safe
as $$ select array[{_functions()}] $$;
comment on function ragsql._metric_functions() is
    'The functions that compute the generation metrics (ragsql_report wraps each for ragsql_reader).';
"""


def _bool(value: bool) -> str:
    return "true" if value else "false"


def measure_sql() -> str:
    """sql/functions/09_measure_registry.sql."""
    families = ",\n".join(
        f"        ({_quote(m.name)}, {_quote(m.cutoff)}, {_bool(m.rel)}, {m.p if m.p is not None else 'null'}::float8, "
        f"{_bool(m.count)})"
        for m in MEASURES
    )
    aliases = ",\n".join(
        f"        ({_quote('^' + a + '$')}, {_bool('(' in a)}, {_quote(m.name)})" for m in MEASURES for a in m.aliases
    )
    return f"""{HEADER}
-- The retrieval measures ragsql.evaluate computes (its formulas: ragsql._evaluate in 10_measure.sql), each with the
-- parameters it takes: cutoff (required, optional: the whole ranking without one, none), rel=<grade>, p=<persistence>
-- with its default; count: the run value sums the queries' values.
create or replace function ragsql._measure_family()
returns table (family text, cutoff text, takes_rel boolean, default_p float8, is_count boolean)
language sql immutable parallel safe
as $$
    select * from (values
{families}
    ) as f(family, cutoff, takes_rel, default_p, is_count)
$$;
comment on function ragsql._measure_family() is
    'The retrieval measure families, as ragsql/registry.py declares them: the parameters each takes.';

-- The spellings trec_eval and ranx users type (lower case): with_k when the pattern's group is the cutoff.
create or replace function ragsql._measure_spelling()
returns table (pattern text, with_k boolean, family text)
language sql immutable parallel safe
as $$
    select * from (values
{aliases}
    ) as a(pattern, with_k, family)
$$;
comment on function ragsql._measure_spelling() is
    'Other spellings of the retrieval measures (regular expressions over the lower-cased name; the group is the '
    'cutoff where with_k), as ragsql/registry.py declares them.';
"""


def metrics_doc() -> str:
    """docs/metrics.md."""
    lines = [
        "# Generation metrics",
        "",
        "<!-- Written by `python -m ragsql.registry_files` from ragsql/registry.py: edit that, not this file. -->",
        "",
        "Every generation metric, as `ragsql.evaluate_generation`, `ragsql scores` and `ragsql.evaluate` name it.",
        "Judge kind: the `ragsql judge --metrics` name whose verdicts it reads (none: computed from the data alone).",
        "Opt-in metrics are judged only when named. Retrieval measures: below.",
        "Also spelled: RAGAS's and DeepEval's names of it (metric classes; any case), which `ragsql.evaluate`,",
        "`ragsql.metrics`, `ragsql metrics --measures` and `compare` take, as they take those classes' objects.",
        "",
        "| metric | also spelled | definition | reads | judge kind | range | better | default | tested against |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in METRICS:
        low, high = (f"{v:g}" for v in m.scale)
        spelled = ", ".join(f"`{a}`" for a in m.aliases) or "—"
        lines.append(
            f"| `{m.name}` | {spelled} | {m.description.replace('|', '&#124;')} | {', '.join(m.needs)} "
            f"| {m.task or '—'} | {low}–{high} | {'higher' if m.higher_is_better else 'lower'} "
            f"| {'yes' if m.default else 'opt-in'} | {m.tested_against} |"
        )
    lines += ["", "Inputs:", ""] + [f"- `{name}`: {text}" for name, text in INPUTS.items()]
    lines += [
        "",
        "# Retrieval measures",
        "",
        "As `ragsql.evaluate`, `ragsql metrics --measures` and `ragsql.evaluate(metrics=...)` name them, with a",
        "relevance level and a persistence as ir_measures writes them (`P(rel=2)@10`, `RBP(p=0.9)`). All range",
        "over 0–1 (the counts excepted) and higher is better.",
        "",
        "| measure | definition | cutoff | rel= | other spellings | tested against |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for m in MEASURES:
        spelled = ", ".join(f"`{a.replace('([0-9]+)', 'k').replace('[_.]', '_')}`" for a in m.aliases) or "—"
        cutoff = {"required": "@k required", "optional": "@k or none", "none": "none"}[m.cutoff]
        extra = f"; p= (default {m.p:g})" if m.p is not None else ""
        lines.append(
            f"| `{m.name}` | {m.description}{' (summed over queries)' if m.count else ''} | {cutoff} "
            f"| {'yes' if m.rel else 'no'}{extra} | {spelled} | {m.tested_against} |"
        )
    return "\n".join(lines) + "\n"


FILES = {
    "sql/functions/09_measure_registry.sql": measure_sql,
    "sql/functions/29_metric_registry.sql": registry_sql,
    "docs/metrics.md": metrics_doc,
}


def main() -> None:
    for path, render in FILES.items():
        (ROOT / path).write_text(render(), encoding="utf-8")
        print(path, file=sys.stderr)
    # the install's fingerprint covers the SQL just written (a test checks it), so a database upgrades on next use
    from ragsql.db.install import fingerprint

    install = ROOT / "sql" / "install.sql"
    text = re.sub(
        r"(?m)^\\set ragsql_fingerprint .*$",
        lambda _: f"\\set ragsql_fingerprint {fingerprint()}",
        install.read_text(encoding="utf-8"),
    )
    install.write_text(text, encoding="utf-8")
    print("sql/install.sql (fingerprint)", file=sys.stderr)


if __name__ == "__main__":
    main()
