"""Every shell, Python and SQL example of README.md and docs/ runs, page by page, and prints what the page shows
(the convention: tests/docs_runner.py)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.conftest import _clone, _end_sessions, _with_dbname, create_database, drop_database
from tests.docs_runner import ROOT, Block, Outcome, Page, blocks, matches, page_env, pages, problems, workspace


def _param(path):
    return pytest.param(path, id=str(path.relative_to(ROOT)))


@pytest.fixture(scope="module")
def fake_endpoint():
    """What a page's endpoint settings become once it points at an endpoint: the fake one, whichever it named."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        key = "docs-example-key"
        yield {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": key,
               "RAGSQL_JUDGE_BASE_URL": fake.base_url, "RAGSQL_JUDGE_API_KEY": key}  # fmt: skip


DEMO = re.compile(r"ragsql demo( --queries [0-9]+)?\n")


class DemoReplays:
    """A page that opens with `ragsql demo` (several do, as a reader starts there) gets, from the second page with
    the same command line on, what the first one's run left: a copy of its database, the files it wrote in its
    folder and home, and its output. The demo's stored values are a function of its inputs (principle 7), so a
    copy is what the command would leave; the first page runs it for real and checks it like any block."""

    def __init__(self, server_url: str, keep: Path):
        self.server_url, self.keep, self.kept = server_url, keep, {}

    def __call__(self, page: Page, block: Block) -> Outcome | None:
        if block.lang not in {"bash", "sh", "shell"} or not DEMO.fullmatch(block.code):
            return None
        dbname = conninfo_to_dict(page.database_url)["dbname"]
        home = Path(page.env["RAGSQL_HOME"])
        if block.code in self.kept:
            template, outcome, files = self.kept[block.code]
            create_database(self.server_url, dbname, template)
            shutil.copytree(files / "work", page.cwd, symlinks=True, dirs_exist_ok=True)
            if (files / "home").exists():
                shutil.copytree(files / "home", home, symlinks=True, dirs_exist_ok=True)
            return outcome
        before = {p.name for p in page.cwd.iterdir()}
        outcome = page._run(block)
        if outcome.code == 0:
            files = self.keep / f"demo{len(self.kept)}"
            (files / "work").mkdir(parents=True)
            for entry in page.cwd.iterdir():
                if entry.name not in before:
                    copy = shutil.copytree if entry.is_dir() and not entry.is_symlink() else shutil.copy2
                    copy(entry, files / "work" / entry.name)
            if home.exists():
                shutil.copytree(home, files / "home", symlinks=True)
            _end_sessions(self.server_url, dbname)
            template = f"ragsql_docs_demo{len(self.kept)}_{dbname}"
            create_database(self.server_url, template, dbname)
            self.kept[block.code] = (template, outcome, files)
        return outcome

    def close(self) -> None:
        for template, _, _ in self.kept.values():
            drop_database(self.server_url, template)


@pytest.fixture(scope="module")
def demo_replays(server_url, tmp_path_factory):
    replays = DemoReplays(server_url, tmp_path_factory.mktemp("demo-replays"))
    yield replays
    replays.close()


FIRST_HALF = {"README.md", "docs/index.md", "docs/guides/evaluate.md", "docs/guides/retriever.md"}
"""Pages that tests/test_docs_examples_first.py runs: the two files go to the two processes of the test command
(pytest-xdist, --dist loadfile), each about half of the pages' time."""


def page_params(first: bool) -> list:
    return [_param(p) for p in pages() if (str(p.relative_to(ROOT)) in FIRST_HALF) == first]


def run_page(path, server_url, fake_endpoint, demo_replays, tmp_path) -> None:
    """The page's runnable blocks, top to bottom, in a fresh RAGSQL_HOME, folder and database of their own."""
    url = _with_dbname(server_url, _clone(server_url))
    try:
        cwd, bin_ = workspace(tmp_path)
        env = page_env(tmp_path / "home", bin_, url)
        Page(path, env, cwd, url, fake_endpoint, replay=demo_replays).run()
    finally:
        drop_database(server_url, conninfo_to_dict(url)["dbname"])


@pytest.mark.parametrize("path", page_params(first=False))
def test_page_examples_run_and_print_what_is_shown(
    path, server_url, template_url, fake_endpoint, demo_replays, tmp_path
):
    """The page's runnable blocks run and print what the page shows (the pages not in FIRST_HALF)."""
    run_page(path, server_url, fake_endpoint, demo_replays, tmp_path)


PAGE = """intro
```bash
echo one
export X=2
```

```text
one
```

*Not run by the tests: it needs a key.*
```python
raise SystemExit(1)
```

```py
print(1)
```

```bash
pip install -e . && python -m pytest
```
"""


def test_blocks_pair_output_and_see_reasons():
    """A text block after only blank lines is the expected output; the italic reason line marks a skipped block."""
    found = blocks(PAGE)
    assert [(b.line, b.lang, b.skipped) for b in found] == [(2, "bash", False), (7, "text", False),
                                                             (12, "python", True), (16, "py", False),
                                                             (20, "bash", False)]  # fmt: skip
    assert found[0].expected is found[1]
    assert problems("p.md", PAGE) == [
        "p.md:16: a ```py block: name it bash, python or sql so that it runs, or put a line "
        "'*Not run by the tests: <why>*' right before it",
        "p.md:20: a ```bash block that installs packages or runs the test suite would change or repeat the "
        "environment these tests run in: put a line '*Not run by the tests: <why>*' right before it",
    ]


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (["a", "...", "d"], ["a", "b", "c", "d"], True),
        (["a", "...", "d"], ["a", "d"], True),
        (["a", "...", "d"], ["a", "b", "c"], False),
        (["a", "b"], ["a", "b", "c"], False),
        (["..."], [], True),
    ],
)
def test_an_ellipsis_line_matches_any_lines(expected, actual, ok):
    assert matches(expected, actual) is ok


STORY = """# A page
```bash
export GREETING=hello
mkdir sub && cd sub && echo made > file.txt
```

```bash
echo "$GREETING from $(basename "$PWD")"; cat file.txt
echo "endpoint: ${OPENAI_BASE_URL:-none}"
```

```text
hello from sub
made
endpoint: none
```

```python
x = 41
```

```python
print(x + 1)
```

```text
42
```

```sql
select 6 * 7 as answer;
```

```text
 answer
--------
     42
(1 row)
```

*Not run by the tests: it names a real endpoint; from here on the page runs against the fake one.*
```bash
export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-...
```

```bash
echo "endpoint: ${OPENAI_BASE_URL%%/v1*}" | sed 's/[0-9]//g'
```

```text
endpoint: http://...:
```

```python
import os
print(os.environ["OPENAI_API_KEY"])
```

```text
docs-example-key
```
"""


def test_a_page_story_shares_shell_state_python_namespace_database_and_endpoint(
    server_url, template_url, fake_endpoint, tmp_path
):
    """Exports, the folder, Python names carry over between a page's blocks; SQL runs on its database; the fake
    endpoint takes over from the block that points at one."""
    page = tmp_path / "story.md"
    page.write_text(STORY, encoding="utf-8")
    url = _with_dbname(server_url, _clone(server_url))
    try:
        cwd, bin_ = workspace(tmp_path)
        Page(page, page_env(tmp_path / "home", bin_, url), cwd, url, fake_endpoint).run()
    finally:
        drop_database(server_url, conninfo_to_dict(url)["dbname"])


def test_a_failing_or_differing_block_is_named_with_its_line(tmp_path, fake_endpoint):
    """Each failure names page:line, the block, its exit code and stderr, or the diff against the shown output."""
    page = tmp_path / "bad.md"
    page.write_text(
        "```bash\necho out; echo boom >&2; exit 3\n```\n\n```python\nprint('printed')\n```\n\n"
        "```text\nshown\n...\n```\n\n```bash\ntrue\n```\n",
        encoding="utf-8",
    )
    cwd, bin_ = workspace(tmp_path)
    with pytest.raises(AssertionError) as failed:
        Page(page, page_env(tmp_path / "home", bin_, "dbname=none"), cwd, "dbname=none", fake_endpoint).run()
    message = str(failed.value)
    assert f"2 example(s) of {page} failed" in message
    assert f"{page}:1: the ```bash block exited 3\n    echo out; echo boom >&2; exit 3\nstderr:\n    boom" in message
    assert f"{page}:5: the output of the ```python block differs from the one shown at line 9" in message
    assert f"--- {page}:9 (shown)\n+++ {page}:5 (printed)" in message
    assert "-shown\n-...\n+printed" in message


def test_a_block_past_its_time_is_killed_with_its_children(tmp_path, fake_endpoint):
    """A block that outlives the timeout fails, and the processes it started are killed with it."""
    page, pid = tmp_path / "slow.md", tmp_path / "pid"
    page.write_text(f"```bash\nsleep 300 & echo $! > {pid}\nwait\n```\n", encoding="utf-8")
    cwd, bin_ = workspace(tmp_path)
    env = page_env(tmp_path / "home", bin_, "dbname=none")
    with pytest.raises(AssertionError, match=r"slow.md:1: the ```bash block exited -9[\s\S]*killed after 2 s"):
        Page(page, env, cwd, "dbname=none", fake_endpoint, timeout=2).run()
    child = int(pid.read_text(encoding="utf-8"))
    for _ in range(50):  # reaped by init a moment after the kill
        stat = Path(f"/proc/{child}/stat")
        if not stat.exists() or stat.read_text(encoding="utf-8").split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the block's child {child} outlived it")
