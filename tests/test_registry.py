"""The metric registry is the one declaration of every generation metric: the files derived from it are current,
the SQL catalog and the judge's plan agree with it, and no metric name is written out anywhere else."""

from __future__ import annotations

import ast

import pytest

from ragsql import registry
from ragsql.registry_files import FILES, ROOT

PACKAGE = ROOT / "ragsql"
# where a metric's name may be written: the registry, each judge call's folder (its prompts, reply model, request
# and offline heuristic) and each judge kind's task, which store and read verdicts under its name
KIND_CODE = ("registry.py", "registry_files.py", "judge/kinds/", "orchestrator/tasks/")


@pytest.mark.parametrize("path", sorted(FILES))
def test_derived_files_are_current(path):
    assert (ROOT / path).read_text(encoding="utf-8") == FILES[path](), (
        f"{path} is stale: run `python -m ragsql.registry_files`"
    )


def _names() -> set[str]:
    fixed = {m.name for m in registry.METRICS if not m.template}
    return fixed | set(registry.KINDS) | {a for m in registry.METRICS for a in m.aliases}


def _written_names(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are metric or kind names, except `__all__` entries and subscripts (a row's column)."""
    names = _names()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip.update(id(n) for n in ast.walk(node.value))
        if isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in skip
    ]


def test_no_metric_name_is_written_outside_the_registry():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.relative_to(PACKAGE).as_posix().startswith(KIND_CODE)
        for line, name in _written_names(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "metric names belong in ragsql/registry.py:\n" + "\n".join(found)


def test_the_check_finds_a_hand_kept_list():
    tree = ast.parse('NEEDS_REFERENCE = {"context_recall", "answer_similarity"}\nrow["faithfulness"]\n')
    assert _written_names(tree) == [(1, "context_recall"), (1, "answer_similarity")]


def test_ragas_and_deepeval_names_resolve_to_one_metric_and_shadow_no_name():
    """Each alias names one metric, any case, and is no ragsql metric or retrieval measure name (RAGAS's bare
    ContextPrecision is the measure here), so resolving never changes what a ragsql name means."""
    aliases = [a.lower() for m in registry.METRICS for a in m.aliases]
    assert len(aliases) == len(set(aliases))
    measures = {m.name.lower() for m in registry.MEASURES}
    assert not measures & set(aliases) and "contextprecision" in measures
    assert all(a.lower() == m.name or a.lower() not in _names() for m in registry.METRICS for a in m.aliases)
    assert registry.resolve(" faithfulnessMETRIC ") == registry.resolve("Faithfulness") == registry.METRICS[0].name
    assert registry.resolve("nDCG@10") == "nDCG@10" and registry.resolve("ContextPrecision") == "ContextPrecision"
    with pytest.raises(ValueError, match="^aspectcritic is a family here: name a member, aspect:<name>$"):
        registry.resolve("aspectcritic")


def test_every_kind_has_a_task_and_prompts_or_no_call():
    from ragsql.orchestrator import tasks

    assert list(tasks.KINDS) == list(registry.KINDS)
    assert all(callable(f) for f in tasks.KINDS.values())


def test_the_catalog_is_the_registry(db):
    conn = db
    rows = conn.execute(
        "select metric, task_kind, needs_reference, higher_is_better, computed_by, description "
        "from ragsql.generation_metric where position < 1000 order by position"
    ).fetchall()
    expected = [
        (m.name, m.task, "reference" in m.needs, m.higher_is_better, m.computed_by, m.description)
        for m in registry.METRICS
        if not m.template
    ]
    assert rows == expected
    for m in registry.METRICS:
        example = m.name.replace("<name>", "coherence" if m.name.startswith("aspect") else "default")
        assert conn.execute("select ragsql.higher_is_better(%s)", (example,)).fetchone()[0] is m.higher_is_better


def test_every_measure_has_one_formula_and_parses():
    """Each declared measure has its branch in ragsql._evaluate's formula map, and no branch is undeclared."""
    import re

    source = (ROOT / "sql" / "functions" / "10_measure.sql").read_text(encoding="utf-8")
    branches = re.findall(r"^\s+when '(\w+)' then", source[source.index("case s.family") :], re.M)
    assert sorted(branches) == sorted(m.name for m in registry.MEASURES)


@pytest.mark.parametrize(
    ("spelled", "parsed"),
    [("P_5", "P@5"), ("ndcg_cut.10", "nDCG@10"), ("hit_rate@3", "Success@3"), ("hit_rate", "Success"),
     ("MRR", "RR"), ("mrr@10", "RR@10"), ("recip_rank", "RR"), ("map", "AP"), ("map_cut_100", "AP@100"),
     ("r-precision", "Rprec"), ("num_rel_ret", "NumRelRet"), ("ndcg_burges@5", "nDCG_burges@5"),
     ("RBP", "RBP(p=0.8)"), ("rbp(p=0.5)@10", "RBP(p=0.5)@10"), ("P(rel=2)@10", "P(rel=2)@10"), ("recall.20", "R@20")],
)  # fmt: skip
def test_measure_spellings_parse_as_declared(db, spelled, parsed):
    assert db.execute("select measure from ragsql._measure_spec(array[%s])", (spelled,)).fetchone()[0] == parsed
