"""One CLI vocabulary, checked over every command and subcommand of the command table (ragsql.cli.COMMANDS).

The rules:
- `--run NAME` always names a run; a file is `--file FILE` or a positional argument, never `--run`.
- `--k` is always a depth (results per query); the constant of Reciprocal Rank Fusion is `--rrf-k`.
- `--metrics` names the generation metrics a command asks the judge for (judge, judge-check: the commands with
  the judging options); `--measures` names the values a command reads or compares (retrieval measures and
  generation metrics alike: metrics, compare, history). A command never has both, nor `--metrics` without judging.
- `--judge MODEL|offline` in every command that reads generation values.
- `--weights` is one form everywhere: NAME=WEIGHT pairs, comma-separated.
- An unknown run is the same line and exit status (1, "an unknown run", ragsql.errors.EXIT_CODES) in every command
  that reads one; a missing input file is a usage error (exit 2, one line) in every command that reads one.
- `scores --format json` rows carry `run`, as `metrics` rows do.
- `ragsql demo`'s defaults are those of the commands it stands for (retrieve --k and --rrf-k, generate --top-n and
  --workers, judge --workers).
- An old spelling keeps working, hidden, with a one-line deprecation note on stderr.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from ragsql.cli import COMMANDS, cli
from ragsql.cli.options import RRF_K
from tests.conftest import cli_database, offline_database, run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "ragsql" / "data" / "example_evalset.jsonl"


def _commands() -> dict[str, click.Command]:
    """Every leaf command by its path ('import trec', 'metrics'), walking the command table's groups."""
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, f"{path} {name}".strip())
        else:
            found[path] = command

    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        walk(command, name)
    return found


COMMAND = _commands()


def _options(path: str) -> dict[str, click.Option]:
    """The visible options of a command by each of their names ('--run': option)."""
    return {
        name: p
        for p in COMMAND[path].params
        if isinstance(p, click.Option) and not p.hidden
        for name in p.opts + p.secondary_opts
    }


def _with(option: str) -> list[str]:
    return [path for path in COMMAND if option in _options(path)]


def test_the_walk_reaches_every_subcommand():
    """The walk sees groups' subcommands, so the rules below cover them."""
    assert {"import trec", "import jsonl", "review export", "show run", "db init", "metrics"} <= set(COMMAND)


def test_run_always_names_a_run():
    """Every --run takes a name, never a path; no file parameter is called run."""
    for path in _with("--run"):
        assert not isinstance(_options(path)["--run"].type, click.Path), path
    for path, command in COMMAND.items():
        for p in command.params:
            if isinstance(p.type, click.Path):
                assert p.name not in ("run", "runs"), (path, p.opts)
                assert not any(o.startswith("--run") for o in p.opts), (path, p.opts)


def test_k_is_a_depth_and_the_rrf_constant_is_rrf_k():
    """Every visible --k is results per query; every option about the fusion constant is --rrf-k, default 60."""
    assert _with("--k")
    for path in _with("--k"):
        assert "results per query" in (_options(path)["--k"].help or "").lower(), path
    assert set(_with("--rrf-k")) == {"retrieve", "fuse"}
    for path, command in COMMAND.items():
        for p in command.params:
            if (
                isinstance(p, click.Option)
                and not p.hidden
                and re.search(r"\bconstant\b|\bk of reciprocal rank fusion", p.help or "", re.I)
            ):
                assert "--rrf-k" in p.opts, (path, p.opts)
                assert p.default == RRF_K, path


def test_metrics_are_judged_and_measures_are_read():
    """--metrics only where the judge is asked (the commands with --embedder and --offline, and `watch add`, which
    stores the metrics its runs ask for); --measures never there; no command has both."""
    judging = {path for path in COMMAND if {"--embedder", "--offline", "--model"} <= set(_options(path))}
    assert judging == {"judge", "judge-check"}
    assert set(_with("--metrics")) == judging | {"watch add"}
    assert set(_with("--measures")) == {"metrics", "compare", "history"}


def test_judge_wherever_generation_values_are_read():
    """Every command reading generation values has --judge MODEL|offline: the same option everywhere (`watch add`
    names the judge whose verdicts ragsql.watch_metrics reads)."""
    reads = {"metrics", "scores", "diagnose", "compare", "check", "history", "report", "review export", "watch add"}
    assert set(_with("--judge")) == reads
    for path in reads:
        assert _options(path)["--judge"].metavar == "MODEL|offline", path


def test_weights_are_one_form():
    """Every --weights takes NAME=WEIGHT pairs, and says so in its metavar."""
    assert set(_with("--weights")) == {"retrieve", "fuse"}
    for path in _with("--weights"):
        assert re.fullmatch(
            r"[A-Za-z0-9]+=[A-Za-z0-9.]+(,[A-Za-z0-9]+=[A-Za-z0-9.]+)+", _options(path)["--weights"].metavar or ""
        )


def test_every_input_file_must_exist():
    """Every path a command reads is checked by click (exit 2); only the files a command writes may be new."""
    for path, command in COMMAND.items():
        for p in command.params:
            if isinstance(p.type, click.Path) and not p.type.writable:
                assert p.type.exists, (path, p.opts)


def test_demo_defaults_are_the_commands_defaults():
    """`ragsql demo` makes the runs retrieve, generate and judge would make with their defaults."""
    demo = _options("demo")
    assert demo["--k"].default == _options("retrieve")["--k"].default
    assert demo["--top-n"].default == _options("generate")["--top-n"].default
    assert _options("retrieve")["--rrf-k"].default == _options("fuse")["--rrf-k"].default == RRF_K
    from ragsql.cli import demo as demo_module

    assert demo_module.GENERATE_WORKERS == _options("generate")["--workers"].default
    assert (
        demo_module.JUDGE_WORKERS
        == _options("judge")["--workers"].default
        == _options("judge-check")["--workers"].default
    )


MISSING = "/no/such/file.txt"
READS_A_FILE = {  # a command that reads a file, with the file missing: every one is a usage error
    "import csv": ["import", "csv", MISSING, "--dataset", "d"],
    "import jsonl": ["import", "jsonl", MISSING, "--dataset", "d"],
    "import trec": ["import", "trec", "--dataset", "d", "--qrels", MISSING],
    "import trec --file": ["import", "trec", "--dataset", "d", "--qrels", str(EXAMPLE), "--file", MISSING],
    "import trec --run FILE (old)": ["import", "trec", "--dataset", "d", "--qrels", str(EXAMPLE), "--run", MISSING],
    "ingest": ["ingest", MISSING, "--corpus", "c"],
    "review import": ["review", "import", MISSING],
    "judge-check": ["judge-check", MISSING, "--offline"],
}


def test_every_file_reading_command_is_listed():
    """READS_A_FILE covers every command with an input path, so a new one cannot skip the missing-file check."""
    readers = {
        path
        for path, command in COMMAND.items()
        if any(isinstance(p.type, click.Path) and not p.type.writable for p in command.params)
    }
    assert readers == {key.split(" --")[0] for key in READS_A_FILE}


@pytest.mark.parametrize("args", READS_A_FILE.values(), ids=list(READS_A_FILE))
def test_a_missing_file_is_a_usage_error_everywhere(monkeypatch, capsys, args):
    """A missing input file: exit 2, one usage line naming the file, before any database work."""
    monkeypatch.setenv("RAGSQL_DATABASE_URL", "postgresql://ragsql@127.0.0.1:1/none")
    monkeypatch.setenv("RAGSQL_CONNECT_TIMEOUT", "0")
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, ""), err
    assert err.startswith("ragsql: usage: ") and err.count("\n") == 1 and MISSING in err, err


UNKNOWN_RUN = 'ragsql: error: unknown run "nope" (runs: ex)\n'
READS_A_RUN = {  # a command that reads a run by name, with an unknown one
    "metrics": ["metrics", "--run", "nope"],
    "scores": ["scores", "--run", "nope"],
    "diagnose": ["diagnose", "--run", "nope"],
    "judge": ["judge", "--run", "nope", "--offline"],
    "generate": ["generate", "--run", "nope", "--offline"],
    "compare": ["compare", "ex", "nope"],
    "check": ["check", "--run", "nope", "--min", "AP=0"],
    "check --baseline": ["check", "--run", "ex", "--baseline", "nope", "--max-drop", "AP=0.1"],
    "report": ["report", "--run", "nope"],
    "report --compare": ["report", "--run", "ex", "--compare", "nope"],
    "fuse": ["fuse", "--runs", "ex,nope", "--run", "f"],
    "review export": ["review", "export", "--run", "nope"],
    "show run": ["show", "run", "nope"],
    "delete": ["delete", "run", "nope", "--yes"],
}
MAKES_A_RUN = {"import csv", "import jsonl", "import trec", "retrieve"}  # --run names the run they store


def test_every_run_reading_command_is_listed():
    """READS_A_RUN covers every command with a run parameter but those that store a new run."""
    named = {
        path
        for path, command in COMMAND.items()
        if any(p.name in ("run", "runs", "compared", "baseline") for p in command.params)
    }
    assert named - MAKES_A_RUN == {key.split(" --")[0] for key in READS_A_RUN} - {"delete"}


@pytest.fixture(scope="module")
def example_url(server_url, template_url):
    """A database with the bundled example eval set as run `ex`, judged offline."""
    with cli_database(
        server_url,
        ["import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex"],
        ["judge", "--run", "ex", "--offline", "--metrics", "faithfulness,answer_correctness"],
    ) as url:
        yield url


@pytest.fixture
def example(example_url, monkeypatch):
    return offline_database(monkeypatch, example_url)


@pytest.mark.parametrize("args", READS_A_RUN.values(), ids=list(READS_A_RUN))
def test_an_unknown_run_is_the_same_line_and_exit_code_everywhere(example, capsys, args):
    """The same `unknown run` line and exit 1 in every command that reads a run."""
    assert run_cli(capsys, *args) == (1, "", UNKNOWN_RUN)


def test_scores_json_rows_carry_the_run(example, capsys):
    """Every row of `scores --format json` names its run, run values and per-query values alike."""
    for extra in ([], ["--per-query"]):
        code, out, err = run_cli(capsys, "scores", "--run", "ex", "--format", "json", *extra)
        assert code == 0, err
        rows = json.loads(out)
        assert rows and all(r["run"] == "ex" for r in rows)


def test_metrics_and_diagnose_read_the_judge_asked_for(example, capsys):
    """--judge of metrics and diagnose chooses whose verdicts are read: the offline judge's give values, a model
    that never judged the run gives none."""

    def faithfulness(judge: str) -> object:
        code, out, err = run_cli(
            capsys, "metrics", "--run", "ex", "--measures", "faithfulness", "--judge", judge, "--format", "json"
        )
        assert code == 0, err
        (row,) = json.loads(out)
        return row["value"]

    assert isinstance(faithfulness("offline"), float)
    assert faithfulness("never-judged") is None

    def checks(judge: str, *extra: str) -> list[dict]:
        code, out, err = run_cli(capsys, "diagnose", "--run", "ex", "--judge", judge, "--format", "json", *extra)
        assert code == 0, err
        return json.loads(out)

    assert "faithfulness" in {r["check_name"] for r in checks("offline")}
    assert "faithfulness" not in {r["check_name"] for r in checks("never-judged")}
    assert any(r["answer_correctness"] is not None for r in checks("offline", "--per-query"))
    assert all(r["answer_correctness"] is None for r in checks("never-judged", "--per-query"))


def test_old_spellings_work_with_a_note(example, capsys, tmp_path):
    """fuse --k, fuse's positional --weights and import trec --run FILE --run-name NAME still work, hidden, each
    with one deprecation note on stderr."""
    qrels, run = tmp_path / "q.qrels", tmp_path / "r.run"
    qrels.write_text("1 0 D1 1\n2 0 D2 1\n", encoding="utf-8")
    run.write_text("1 Q0 D1 1 2 t\n1 Q0 D2 2 1 t\n2 Q0 D2 1 2 t\n", encoding="utf-8")
    code, out, err = run_cli(
        capsys, "import", "trec", "--dataset", "t", "--qrels", str(qrels), "--run", str(run), "--run-name", "a"
    )
    assert code == 0 and "run a:" in out, err
    assert [line for line in err.splitlines() if "deprecated" in line] == [
        "ragsql: note: import trec --run-name is deprecated: use --run NAME",
        "ragsql: note: import trec --run FILE is deprecated: use --file FILE [--run NAME]",
    ]
    code, out, err = run_cli(
        capsys, "import", "trec", "--dataset", "t", "--qrels", str(qrels), "--file", str(run), "--run", "b"
    )
    assert (code, err) == (0, "") and "run b:" in out
    code, out, err = run_cli(capsys, "fuse", "--runs", "a,b", "--run", "f1", "--k", "10", "--format", "json")
    assert code == 0 and json.loads(out)["k"] == 10
    assert err == "ragsql: note: fuse --k is deprecated: use --rrf-k\n"
    code, out, err = run_cli(
        capsys, "fuse", "--runs", "a,b", "--run", "f2", "--method", "wsum", "--weights", "0.7,0.3", "--format", "json"
    )
    assert code == 0 and json.loads(out)["weights"] == [0.7, 0.3]
    assert err == "ragsql: note: fuse --weights 0.7,0.3 is deprecated: use --weights a=0.7,b=0.3\n"
    code, out, err = run_cli(
        capsys,
        "fuse",
        "--runs",
        "a,b",
        "--run",
        "f3",
        "--method",
        "wsum",
        "--weights",
        "b=0.3,a=0.7",
        "--format",
        "json",
    )
    assert (code, err) == (0, "") and json.loads(out)["weights"] == [0.7, 0.3]
    code, out, err = run_cli(capsys, "fuse", "--runs", "a,b", "--run", "f4", "--rrf-k", "7", "--format", "json")
    assert (code, err) == (0, "") and json.loads(out)["k"] == 7
