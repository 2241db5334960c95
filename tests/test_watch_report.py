"""`ragsql report --watch`: a watch's metrics window by window, in the terminal and as an HTML page of charts with
their interval bands (rendered in headless Chromium, as the run report is)."""

from __future__ import annotations

import json
import re
from datetime import timezone

import psycopg

from tests.conftest import run_cli
from tests.sql.test_roles import _member
from tests.test_report import NETWORK, render
from tests.test_watch import ADD, BAD, GOOD, _run, _window, source  # noqa: F401 (source: the fixture)

ROW = re.compile(r"^\s*(\d{4}-\d\d-\d\dT\d\d:\d\dZ)\s+(.*)$")


def _watched(conn: psycopg.Connection, capsys) -> None:
    """Watch w (faithfulness, and the measures read from its verdicts) over three windows: two closed hours of
    2026-01-01 and the current, open, hour."""
    assert run_cli(capsys, *ADD, "--backfill")[0] == 0
    _window(conn, "2026-01-01 08:05+00", [GOOD] * 3 + [BAD])
    _window(conn, "2026-01-01 09:05+00", [GOOD, BAD, BAD])
    _window(conn, "now", [GOOD, GOOD])
    _run(capsys)


def _metrics(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("select distinct metric from ragsql.watch_metrics where watch = 'w' order by 1")]


def _expected(conn: psycopg.Connection, metric: str) -> list[list[str]]:
    """The rows of ragsql.watch_metrics for one metric, formatted as the terminal table shows them."""
    rows = conn.execute(
        "select to_char(window_start at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI\"Z\"'), value, ci_low, ci_high, "
        "n, judged, skipped, closed from ragsql.watch_metrics where watch = 'w' and metric = %s order by window_start",
        (metric,),
    ).fetchall()
    return [
        [start, f"{v:.4f}", f"[{lo:.4f},", f"{hi:.4f}]", str(n), str(j), str(s), "yes" if closed else "open"]
        for start, v, lo, hi, n, j, s, closed in rows
    ]


def _tables(out: str) -> dict[str, list[list[str]]]:
    """The terminal report's tables: metric -> its rows, split on blanks and column rules."""
    tables: dict[str, list[list[str]]] = {}
    metric = ""
    for line in out.splitlines():
        title = re.match(r"watch w: (\S+) per window", line.strip())
        if title:
            metric = title.group(1)
            tables[metric] = []
        elif (row := ROW.match(line)) is not None:
            tables[metric].append([row.group(1), *(cell for cell in row.group(2).split() if cell != "│")])
    return tables


def test_report_watch_prints_each_metric_window_by_window_as_watch_metrics_has_it(
    source, fresh_db, capsys, monkeypatch
):
    """One table per metric, a row per window (start, value, interval, n, judged, skipped, closed) equal to the rows
    of ragsql.watch_metrics; a reader, who may not read answers, gets the same report."""
    _watched(source, capsys)
    code, out, err = run_cli(capsys, "report", "--watch", "w")
    assert code == 0, err
    tables = _tables(out)
    assert sorted(tables) == _metrics(source) and "faithfulness" in tables
    for metric, rows in tables.items():
        expected = _expected(source, metric)
        assert len(expected) == 3 and [r[-1] for r in expected] == ["yes", "yes", "open"]
        assert rows == expected, metric
    with _member(fresh_db, "ragsql_reader") as url:
        monkeypatch.setenv("RAGSQL_DATABASE_URL", url)
        code, as_reader, err = run_cli(capsys, "report", "--watch", "w")
    assert code == 0, err
    assert _tables(as_reader) == tables


def test_report_watch_format_json_is_one_object_of_watch_metrics_rows(source, capsys, tmp_path):
    """--format json: one object whose metrics map each metric to its windows, oldest first, with the values of
    ragsql_report.watch_metrics (and the window's run); with --html the page is written and named in it, and
    nothing else is printed."""
    _watched(source, capsys)
    page = tmp_path / "watch.html"
    code, out, err = run_cli(capsys, "report", "--watch", "w", "--format", "json", "--html", str(page))
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert (data["watch"], data["html"], data["warnings"]) == ("w", str(page.resolve()), [])
    assert page.exists() and sorted(data["metrics"]) == _metrics(source)
    rows = source.execute(
        "select metric, window_start, window_end, value, ci_low, ci_high, n, judged, skipped, closed "
        "from ragsql_report.watch_metrics where watch = 'w' order by metric, window_start"
    ).fetchall()
    got = [
        (metric, *(p[k] for k in ("window_start", "window_end", "value", "ci_low", "ci_high", "n", "judged")),
         p["skipped"], p["closed"])
        for metric, points in data["metrics"].items()
        for p in points
    ]  # fmt: skip
    expected = [(m, _utc(s), _utc(e), *rest) for m, s, e, *rest in rows]
    assert sorted(got) == sorted(expected) and len(got) == 3 * len(data["metrics"])
    assert [p["run"] for p in data["metrics"]["faithfulness"]][:2] == ["w@2026-01-01T08:00Z", "w@2026-01-01T09:00Z"]
    assert any(p["value"] is not None and p["ci_low"] < p["ci_high"] for p in data["metrics"]["faithfulness"])


def _utc(at) -> str:
    return at.astimezone(timezone.utc).isoformat()


def test_the_watch_page_draws_each_metric_with_its_band_and_marks_open_windows(source, capsys, tmp_path):
    """--html: one chart per metric, each with its interval band, closed and open windows drawn apart; Chromium
    renders it with no console message and the page loads nothing."""
    _watched(source, capsys)
    page = tmp_path / "watch.html"
    code, out, err = run_cli(capsys, "report", "--watch", "w", "--html", str(page))
    assert code == 0, err
    assert f"report written to {page.resolve()}" in out
    html = page.read_text(encoding="utf-8")
    assert NETWORK.search(html) is None, NETWORK.search(html)
    dom, console = render(page)
    assert console == []
    charts = re.findall(r'<div class="chart" id="(chart-watch-\d+)">', dom)
    metrics = _metrics(source)
    assert len(metrics) >= 2 and charts == [f"chart-watch-{i}" for i in range(len(metrics))]
    for i, chart in enumerate(charts):
        block = dom[dom.index(f'id="{chart}"') :]
        block = block[: block.index("</div>")]
        assert block.count("<svg") == 1, chart
        for part in ("band", "closed", "open"):
            assert f'id="watch-{i}-{part}"' in block, (chart, part)
    assert dom.count('<tr class="open">') == len(metrics) and dom.count('<tr class="closed">') == 2 * len(metrics)
    assert "OFFLINE" in dom


def test_a_watch_with_no_window_yet_is_one_line_and_no_chart(source, capsys, tmp_path):
    """Before its first capture a watch has no window: the report says so in one line (a warning in JSON), and its
    page holds that line and no chart."""
    assert run_cli(capsys, *ADD)[0] == 0
    page = tmp_path / "empty.html"
    code, out, err = run_cli(capsys, "report", "--watch", "w", "--html", str(page))
    assert (code, err) == (0, "")
    line = "watch w has no window yet: run `ragsql watch run w --once`"
    assert out.splitlines() == [line, f"report written to {page.resolve()}"]
    dom, console = render(page)
    assert console == [] and "<svg" not in dom and "chart-watch" not in dom
    assert "has no window yet" in dom
    code, out, err = run_cli(capsys, "report", "--watch", "w", "--format", "json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"watch": "w", "metrics": {}, "html": None, "warnings": [line]}


def test_an_unknown_watch_is_the_common_unknown_name_line(source, capsys):
    """An unknown watch is exit 1 and the line every unknown name gets: none known yet, then the known ones."""
    assert run_cli(capsys, "report", "--watch", "nope") == (
        1,
        "",
        'ragsql: error: unknown watch "nope" (there are no watches yet: see ragsql watch add)\n',
    )
    assert run_cli(capsys, *ADD)[0] == 0
    assert run_cli(capsys, "report", "--watch", "nope", "--html", "x.html") == (
        1,
        "",
        'ragsql: error: unknown watch "nope" (watches: w)\n',
    )
