"""The judge soak in small (bench/soak.py, 500 tasks): a faulty endpoint, a SIGKILLed judge, PostgreSQL
restarted mid-run, then a clean re-run; one soak per module, each test checks one goal of its report."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("ragsql_bench_soak", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    """(report, table): 50 samples x 10 kinds judged by two processes of 4 workers against 10% faults."""
    module = _soak_module()
    report = module.run_soak(module.Config(samples=50, home=tmp_path_factory.mktemp("soak_home"), wait=300))
    table = "\n".join(f"{measure}: {value}" for measure, value, _ in module.rows(report))
    return report, table


def test_soak_went_as_planned(soak):
    """The soak did what it says: 500 tasks, faults given, the first judge killed, the server restarted."""
    report, table = soak
    assert report.tasks == 500
    assert report.procs[0].killed, report.events
    assert any("PostgreSQL restarted" in e for e in report.events), report.events
    assert report.chat["answered 429"] and report.chat["answered 5xx"] and report.chat["answered in prose"], table


def test_no_task_lost_or_left_running(soak):
    """No task is lost or left running, and a process that exits (not killed) leaves none running."""
    report, table = soak
    assert report.lost == 0, table
    assert report.running == 0, table
    assert report.running_after_exit == 0, table


def test_processes_end_cleanly(soak):
    """No process prints a traceback, hangs or writes more than one error line; the survivor of the restart exits
    0, 1 or 3, the re-run 0 or 3; every task ends done or failed with its reason."""
    report, table = soak
    assert [p.traceback for p in report.procs] == [False] * 3, [p.stderr_tail for p in report.procs]
    assert not any(p.hung for p in report.procs)
    assert [p.error_lines <= 1 for p in report.procs] == [True] * 3, [p.stderr_tail for p in report.procs]
    assert report.procs[1].exit in (0, 1, 3), report.procs[1]
    assert report.procs[-1].exit in (0, 3), report.procs[-1]
    assert report.final.get("done", 0) + report.final.get("failed", 0) == 500, table


def test_the_clean_rerun_judges_every_task(soak):
    """After the clean re-run every task is done (exit 0)."""
    report, table = soak
    assert report.final == {"done": 500}, (table, report.reasons_final)
    assert report.procs[-1].exit == 0, report.procs[-1]


def test_no_stored_chat_reply_bought_again(soak):
    """No chat request is sent after its reply was stored, none is answered twice to two live processes, and
    judge_call holds one successful row per request."""
    report, table = soak
    assert report.chat["sent after stored"] == 0, table
    assert report.chat["bought twice by live processes"] == 0, table
    assert report.calls_table["ok rows stored twice"] == 0
    assert report.chat["unique requests stored ok"] == report.calls_table["chat rows ok"] == 500


@pytest.mark.xfail(
    reason="embedding batches are shared in flight within a process (Judging.embed) but not claimed "
    "across processes: two processes judging tasks of one sample at once may both embed its "
    "texts (rare; passes on most runs)",
    strict=False,
)
def test_no_stored_embedding_bought_again(soak):
    """No text is embedded after its embedding was stored, nor twice by live processes."""
    report, table = soak
    assert report.embed["sent after stored"] == 0, table
    assert report.embed["texts bought twice"] == report.embed["texts bought twice, once by the killed process"], table
