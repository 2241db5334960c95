"""The generated reference pages of the docs site are current: the CLI's from the command table and each command's
help, the SQL API's from the catalog's comments of an installed database (python -m ragsql.docs_files writes both)."""

from __future__ import annotations

import re

from ragsql.cli import COMMANDS
from ragsql.docs_files import CLI_PAGE, ROOT, SQL_PAGE, cli_reference, sql_reference
from tests.conftest import run_cli

STALE = "is stale: run `python -m ragsql.docs_files`"


def test_cli_reference_is_current():
    assert (ROOT / CLI_PAGE).read_text(encoding="utf-8") == cli_reference(), f"{CLI_PAGE} {STALE}"


def test_cli_reference_is_what_help_prints_whatever_ran_before(capsys):
    """The page shows `-h, --help` as `ragsql CMD --help` prints it, also after commands ran in this process (click
    keeps a command's help option once made: the page differed by test order)."""
    page = cli_reference()
    for args in (["report", "--help"], ["db", "url", "--help"], ["judge", "-h"]):
        code, out, _ = run_cli(capsys, *args)
        assert code == 0 and "-h, --help" in out
        assert out.strip().splitlines()[-1].strip() in page
    assert cli_reference() == page and page.count("-h, --help") >= len(COMMANDS)


def test_cli_reference_has_every_command_and_subcommand_with_its_options():
    page = cli_reference()
    headings = re.findall(r"^#+ `ragsql ([a-z -]+)`$", page, flags=re.M)
    assert [h for h in headings if " " not in h] == list(COMMANDS)
    assert {"db init", "import jsonl", "import trec", "review export", "show run"} <= set(headings)
    assert "--max-drop" in page.split("`ragsql check`", 1)[1].split("### `ragsql history`", 1)[0]


def test_sql_reference_is_current(db):
    assert (ROOT / SQL_PAGE).read_text(encoding="utf-8") == sql_reference(db), f"{SQL_PAGE} {STALE}"


def test_sql_reference_follows_the_catalog(db):
    """A comment changed in the database shows on the page; internal functions stay out."""
    page = sql_reference(db)
    assert "### `ragsql.compare(" in page and "### `ragsql.run_measure`" in page
    assert "ragsql._evaluate(" not in page
    db.execute("comment on view ragsql.run_measure is 'a changed comment'")
    assert "a changed comment" in sql_reference(db)
