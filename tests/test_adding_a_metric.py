"""docs/adding-a-metric.md, followed to the letter: a copy of the tree gets the page's registry line and prompt files,
runs the page's command, and the new metric is then judged and shown everywhere with no other edit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import create_database
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "adding-a-metric.md").read_text(encoding="utf-8")
TOY = "polite"
RECORDS = [
    {"qid": "q1", "user_input": "Who wrote Hamlet?", "response": "Hamlet was written by Shakespeare.",
     "retrieved_contexts": ["Hamlet is a tragedy by William Shakespeare."], "reference": "William Shakespeare"},
    {"qid": "q2", "user_input": "What is the boiling point of water?", "response": "Ask someone else.",
     "retrieved_contexts": ["Water boils at 100 degrees Celsius at sea level."], "reference": "100 °C"},
]  # fmt: skip


def _follow_the_page(tree: Path) -> None:
    """Step 1: the registry line into METRICS; step 2: each prompt file; step 3: the page's command."""
    entry = re.search(r"```python\n# in METRICS, ragsql/registry\.py\n(.*?)```", PAGE, re.S)
    assert entry, "the page's registry step is missing"
    registry = tree / "ragsql" / "registry.py"
    head = "METRICS: tuple[Metric, ...] = (\n"
    text = registry.read_text(encoding="utf-8")
    assert head in text
    registry.write_text(text.replace(head, head + entry.group(1), 1), encoding="utf-8")
    prompts = re.findall(r"`(ragsql/judge/kinds/[\w./]+\.txt)`:\n\n```text\n(.*?)```", PAGE, re.S)
    assert sorted(p for p, _ in prompts) == [f"ragsql/judge/kinds/{TOY}/en.txt", f"ragsql/judge/kinds/{TOY}/zh.txt"]
    for path, body in prompts:
        (tree / path).parent.mkdir(exist_ok=True)
        (tree / path).write_text(body, encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)```", PAGE, re.S)
    assert commands == ["python -m ragsql.registry_files\n"]
    subprocess.run([sys.executable, "-m", "ragsql.registry_files"], cwd=tree, env=_env(tree, {}), check=True)


def _env(tree: Path, extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1", "COLUMNS": "250", **extra}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for part in ("ragsql", "sql", "docs"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    _follow_the_page(tree)
    return tree


def test_the_page_adds_a_judged_metric_shown_everywhere(tree, server_url, tmp_path):
    url = create_database(server_url, "adding_a_metric")
    with FakeOpenAI() as fake:
        env = _env(
            tree,
            {
                "RAGSQL_DATABASE_URL": url,
                "RAGSQL_JUDGE_BASE_URL": fake.base_url,
                "RAGSQL_JUDGE_API_KEY": "k",
                "RAGSQL_JUDGE_MODEL": "fake-judge",
                "RAGSQL_HOME": str(tmp_path / "home"),
            },
        )

        def ragsql(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "ragsql", *args], cwd=tree, env=env, capture_output=True, text=True
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        assert TOY in ragsql("judge", "--help")
        data = tmp_path / "toy.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
        for run in ("a", "b"):
            ragsql("import", "jsonl", str(data), "--dataset", "toy", "--run", run)
            ragsql("judge", "--run", run, "--metrics", TOY)
        assert fake.stats()["chat_calls"] == 2  # one call per answer; run b's same answers come from the cache

        per_query = {(r["qid"], r["measure"]): r["value"] for r in json.loads(
            ragsql("scores", "--run", "a", "--per-query", "--format", "json")) if r["measure"] == TOY}  # fmt: skip
        assert per_query == {("q1", TOY): 1.0, ("q2", TOY): 0.0}  # the fake says yes when a question word is used
        assert TOY in ragsql("compare", "a", "b")
        page = tmp_path / "report.html"
        ragsql("report", "--run", "a", "--compare", "b", "--html", str(page))
        assert TOY in page.read_text(encoding="utf-8")

        script = (
            "import json, sys, ragsql\n"
            f"result = ragsql.evaluate(json.load(sys.stdin), run='c', dataset='toy-api', database_url={url!r})\n"
            "print(json.dumps(sorted(result.scores)))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tree, input=json.dumps(RECORDS), env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert TOY in json.loads(done.stdout.splitlines()[-1])


def test_the_copy_is_clean_but_for_the_page(tree):
    """The copy passes the registry's own checks: generated files current, no name written elsewhere."""
    done = subprocess.run(
        [sys.executable, "-c", "from ragsql.registry_files import FILES, ROOT; "
         "import sys; sys.exit(any((ROOT / p).read_text() != r() for p, r in FILES.items()))"],
        cwd=tree, env=_env(tree, {}),
    )  # fmt: skip
    assert done.returncode == 0
    assert TOY in (tree / "docs" / "metrics.md").read_text(encoding="utf-8")
    assert f"'{TOY}'" in (tree / "sql" / "functions" / "29_metric_registry.sql").read_text(encoding="utf-8")


def test_the_page_counts_the_files_the_copy_changes(tree):
    """The page's "Files touched" for a yes/no metric is the number of files the copy adds or changes."""
    touched = sorted(
        str(path.relative_to(tree))
        for part in ("ragsql", "sql", "docs")
        for path in (tree / part).rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and (
            not (ROOT / path.relative_to(tree)).is_file()
            or (ROOT / path.relative_to(tree)).read_bytes() != path.read_bytes()
        )
    )
    assert touched == [
        "docs/metrics.md",
        f"ragsql/judge/kinds/{TOY}/en.txt",
        f"ragsql/judge/kinds/{TOY}/zh.txt",
        "ragsql/registry.py",
        "sql/functions/29_metric_registry.sql",
        "sql/install.sql",
    ]
    stated = re.search(r"## A new yes/no judge metric.*?Files touched: 3 .*?: (\d+) in all", PAGE, re.S)
    assert stated and int(stated.group(1)) == len(touched)
