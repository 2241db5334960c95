"""`ragsql report`: the terminal report, and the HTML page rendered in headless Chromium (Debian's chromium)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from ragsql import registry
from ragsql.cli import main
from tests.conftest import judged_demo, run_cli
from tests.loading import load_trec

CHARTS = ["chart-overview", "chart-forest", "chart-heatmap", "chart-distributions"]
NETWORK = re.compile(
    r"""(?:\bsrc|\bhref|@import)\s*=?\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|<script|<link""", re.I
)


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    with judged_demo(server_url, 12) as url:
        yield url


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return found


def render(page: Path) -> tuple[str, list[str]]:
    """The DOM headless Chromium builds from the file (network refused), and its console messages."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def test_the_console_check_catches_an_error(tmp_path):
    """The check below can fail: a page that logs an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>console.error("broken chart")</script></body></html>', encoding="utf-8")
    _, console = render(page)
    assert any("broken chart" in line for line in console)


def test_html_report_renders_with_every_chart_no_console_message_and_no_network(demo, tmp_path, capsys):
    page = tmp_path / "report.html"
    code = main(
        [
            "report",
            "--run",
            "demo-bm25",
            "--compare",
            "demo-vector",
            "--compare",
            "demo-hybrid",
            "--html",
            str(page),
            "--resamples",
            "500",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"report written to {page.resolve()}" in out and "demo-vector against demo-bm25" in out
    html = page.read_text(encoding="utf-8")
    assert NETWORK.search(html) is None, NETWORK.search(html)
    dom, console = render(page)
    assert console == []
    for chart in CHARTS:
        block = dom[dom.index(f'id="{chart}"') :]
        assert block.index("<svg") < block.index("</div>"), chart  # the chart's SVG is inside its block
    assert dom.count("<path") > 200
    assert "OFFLINE" in dom and "offline-heuristic-v7+e5-onnx:multilingual-e5-small-int8-g2" in dom
    with psycopg.connect(demo) as conn:
        worst = conn.execute(
            "select qid from ragsql.diagnose_queries('demo-bm25') where answer_correctness is not null "
            'order by answer_correctness, qid collate "C" limit 1'
        ).fetchone()[0]
        question = conn.execute(
            "select q.text from ragsql.query as q join ragsql.dataset as d on d.id = q.dataset_id "
            "where d.name = 'demo' and q.qid = %s",
            (worst,),
        ).fetchone()[0]
        verdicts = conn.execute(
            "select distinct verdict from ragsql.statement_verdicts('demo-bm25') as v where v.qid = %s", (worst,)
        ).fetchall()
    assert f"<strong>{worst}</strong>" in dom and question.replace("'", "&#39;").replace('"', "&#34;")[:30] in dom
    for (verdict,) in verdicts:
        assert f'class="{verdict}"' in dom
    assert "what changed" in dom.lower() and "mode</code> bm25 → vector" in dom


def test_a_run_without_generation_metrics_still_renders_and_says_so(fresh_db, tmp_path, capsys):
    with psycopg.connect(fresh_db) as conn:
        load_trec(
            conn, "q1 0 d1 1\nq2 0 d2 1\nq3 0 d3 2", "q1 Q0 d1 0 3 r\nq2 Q0 d9 0 2 r\nq3 Q0 d3 0 1 r", run_name="plain"
        )
        conn.commit()
    page = tmp_path / "plain.html"
    code = main(["report", "--run", "plain", "--html", str(page), "--resamples", "200"])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "no generation metrics" in err
    dom, console = render(page)
    assert console == [] and "no generation metrics" in dom and "No diagnosis" in dom
    assert 'id="chart-overview"' in dom and "nDCG@10" in dom


def test_report_refuses_unknown_runs_and_other_datasets(demo, capsys):
    assert main(["report", "--run", "nope"]) == 1
    assert 'unknown run "nope"' in capsys.readouterr().err
    with psycopg.connect(demo) as conn:
        conn.execute("insert into ragsql.dataset (name) values ('other')")
        conn.execute(
            "insert into ragsql.run (name, dataset_id) select 'far', id from ragsql.dataset where name = 'other'"
        )
    try:
        assert main(["report", "--run", "demo-bm25", "--compare", "far"]) == 1
        assert "another dataset" in capsys.readouterr().err
    finally:
        with psycopg.connect(demo) as conn:
            conn.execute("delete from ragsql.run where name = 'far'")
            conn.execute("delete from ragsql.dataset where name = 'other'")


def test_demo_writes_its_report(demo, tmp_path, capsys):
    """`ragsql demo` ends by writing the report of its three runs and printing the path."""
    page = tmp_path / "demo.html"
    assert main(["demo", "--queries", "3", "--name", "tiny", "--report", str(page)]) == 0
    err = capsys.readouterr().err
    assert str(page.resolve()) in err.replace("\n", "")
    html = page.read_text(encoding="utf-8")
    assert "Run tiny-bm25" in html and "tiny-vector" in html and "tiny-hybrid" in html


def _chart(html: str, name: str) -> str:
    """The markup of one chart of the page (its <svg>, up to the next chart)."""
    start = html.index(f'id="{name}"')
    ends = [html.index(f'id="{other}"', start) for other in CHARTS if f'id="{other}"' in html[start + 1 :]]
    return html[start : min(ends)] if ends else html[start:]


def test_a_measure_constant_across_queries_has_an_interval_holding_it_and_renders(fresh_db, tmp_path, capsys):
    """Every query's P@3 is 2/3 (and nDCG@10, AP, ... constant too): the report's intervals hold their values and
    the page renders (issue 26: ci_low 0.6666666666666666 above the value 0.6666666666666665 from float4 resample
    sums, and matplotlib refused the negative error bar)."""
    with psycopg.connect(fresh_db) as conn:
        load_trec(
            conn,
            "\n".join(f"q{i:02} 0 d{j} 1" for i in range(40) for j in (1, 2)),
            "\n".join(f"q{i:02} Q0 {d} 0 {s} r" for i in range(40) for d, s in (("d1", 3), ("d2", 2), ("x", 1))),
            run_name="flat",
        )
        conn.commit()
        rows = conn.execute(
            "select measure, value, ci_low, ci_high from ragsql.measure_ci('flat', "
            "array['P@3', 'P@5', 'P@10', 'nDCG@10', 'AP', 'RR'], 500)"
        ).fetchall()
    assert len(rows) == 6 and all(low <= value <= high for _, value, low, high in rows), rows
    page = tmp_path / "flat.html"
    code = main(["report", "--run", "flat", "--html", str(page), "--resamples", "500"])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "P@5" in _chart(page.read_text(encoding="utf-8"), "chart-overview")  # 2/5 for every query


def test_run_names_with_dollars_and_a_leading_underscore_are_drawn_literally(fresh_db, tmp_path, capsys):
    """A run named `budget $5_a_b$` is drawn as written (not read as mathtext, which crashed the page) and a run
    named `_x` keeps its legend entry (matplotlib leaves out a collected label starting with "_")."""
    from ragsql.db import load

    qrels, run = "q1 0 d1 1\nq2 0 d2 1\nq3 0 d3 2", "q1 Q0 d1 0 3 r\nq2 Q0 d9 0 2 r\nq3 Q0 d3 0 1 r"
    with psycopg.connect(fresh_db) as conn:
        load_trec(conn, qrels, run, run_name="budget $5_a_b$", dataset="names")
        run_id = load.create_run(conn, "_x", load.ensure_dataset(conn, "names"))
        load.add_run_results(
            conn, run_id, [("q1", None, "d9", 1.0, None), ("q2", None, "d2", 1.0, None)], rank_by_score=True
        )
        conn.commit()
    page = tmp_path / "names.html"
    code = main(["report", "--run", "budget $5_a_b$", "--compare", "_x", "--html", str(page), "--resamples", "200"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "budget $5_a_b$" in out and "_x" in out
    html = page.read_text(encoding="utf-8")
    overview, forest = _chart(html, "chart-overview"), _chart(html, "chart-forest")
    assert "budget $5_a_b$" in overview and ">_x<" in overview  # the legend: one entry per run
    assert "(_x)" in forest


def test_the_overview_chart_never_passes_a_negative_error_bar():
    """An interval that excludes its value by rounding (the value one ulp below ci_low, as float4 sums gave) is
    drawn as a point instead of crashing matplotlib with "'xerr' must not contain negative values"."""
    from ragsql.db.compare import IntervalValue
    from ragsql.report import charts

    rows = [
        IntervalValue("r", "P@3", "retrieval", 0.6666666666666665, 0.6666666666666666, 0.6666666666666666, 40, 0, None),
        IntervalValue("r", "P@5", "retrieval", 0.4, 0.3, 0.39999999999999997, 40, 0, None),
    ]
    assert "P@3" in charts.overview({"r": rows})


def _headline(html: str) -> dict[str, list[str]]:
    """The headline table's rows: measure -> its cells' text."""
    table = html[html.index('id="table-headline"') :]
    table = table[: table.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_first_screen_says_who_won_with_the_baseline_compare_uses(demo, tmp_path, capsys):
    """The headline table comes before the overview; its diffs and significance marks are those of
    `ragsql compare A B` (the same baseline, the same seed), and its tally counts them."""
    page = tmp_path / "won.html"
    args = ["--resamples", "500", "--seed", "0.25"]
    code = main(["report", "--run", "demo-bm25", "--compare", "demo-hybrid", "--html", str(page), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.index("headline: demo-hybrid against demo-bm25") < out.index("values with their")
    html = page.read_text(encoding="utf-8")
    assert html.index('id="headline"') < html.index('id="overview"') < html.index('id="comparison"')
    code = main(["compare", "demo-bm25", "demo-hybrid", "--format", "json", *args])
    compared, err = capsys.readouterr()
    assert code == 0, err
    rows = {r["measure"]: r for r in json.loads(compared)}
    headline = _headline(html)
    assert "nDCG@10" in headline and "faithfulness" in headline and len(headline) >= 8
    better = worse = 0
    for measure, (baseline, value, diff) in headline.items():
        row = rows[measure]
        assert (row["baseline"], row["run"]) == ("demo-bm25", "demo-hybrid")
        assert baseline == f"{row['baseline_value']:.4f}" and value == f"{row['value']:.4f}"
        mark = ""
        if row["significant"]:
            higher = measure not in {m.name for m in registry.METRICS if not m.higher_is_better}
            mark = " ▲" if (row["diff"] > 0) == higher else " ▼"
            better, worse = better + (mark == " ▲"), worse + (mark == " ▼")
        assert diff == f"{row['diff']:+.4f}{mark}", measure
    assert (
        f"demo-hybrid: significantly better on {better}, worse on {worse}, no significant difference on "
        f"{len(headline) - better - worse} of {len(headline)} headline measures" in html
    )


def _platform_fonts(page: Path, selector: str) -> list[dict]:
    """The fonts headless Chromium draws `selector`'s text with (DevTools: CSS.getPlatformFontsForNode)."""
    from websockets.sync.client import connect

    profile = tempfile.mkdtemp(prefix="chromium-", dir=page.parent)  # left to pytest: Chromium's helpers outlive it
    browser = subprocess.Popen(
        [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-port=0",
         f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", "about:blank"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert browser.stderr is not None
        line = ""
        while "DevTools listening on " not in line:
            line = browser.stderr.readline()
            assert line, "chromium exited before opening DevTools"
        with connect(line.split("DevTools listening on ")[1].strip(), max_size=None) as ws:
            ids = iter(range(1, 1000))

            def send(method: str, session: str | None = None, **params) -> dict:
                number = next(ids)
                message = {"id": number, "method": method, "params": params}
                ws.send(json.dumps(message if session is None else {**message, "sessionId": session}))
                while True:
                    reply = json.loads(ws.recv(timeout=60))
                    if reply.get("id") == number:
                        assert "error" not in reply, reply
                        return reply["result"]

            target = send("Target.createTarget", url=page.as_uri())["targetId"]
            session = send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for _ in range(600):
                state = send("Runtime.evaluate", session, expression="document.readyState")
                if state["result"]["value"] == "complete":
                    break
                time.sleep(0.05)
            send("DOM.enable", session)
            send("CSS.enable", session)
            root = send("DOM.getDocument", session)["root"]["nodeId"]
            node = send("DOM.querySelector", session, nodeId=root, selector=selector)["nodeId"]
            fonts = send("CSS.getPlatformFontsForNode", session, nodeId=node)["fonts"]
            ws.send(json.dumps({"id": 0, "method": "Browser.close"}))
            return fonts
    finally:
        try:
            browser.wait(timeout=30)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


def test_a_chinese_run_is_drawn_with_a_font_the_page_names_and_a_metric_without_value_says_why(
    fresh_db, endpoint, tmp_path, capsys
):
    """A run named in Chinese: its title's glyphs come from a CJK font the page's CSS lists (not the browser's own
    fallback); faithfulness judged by a judge that only returns garbage shows "no value" and the failure."""
    from tests.conftest import EXAMPLE

    run = "检索实验"
    assert run_cli(capsys, "import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", run)[0] == 0
    endpoint.malformed_next(10_000)
    assert run_cli(capsys, "judge", "--run", run, "--metrics", "faithfulness")[0] == 3
    page = tmp_path / "zh.html"
    code, out, err = run_cli(capsys, "report", "--run", run, "--html", str(page), "--resamples", "200")
    assert code == 0, err
    assert f"no value: {run} faithfulness: judge failed" in out and "of 12 queries)" in out
    html = page.read_text(encoding="utf-8")
    named = re.search(r"body \{ font-family: ([^;]+);", html)
    assert named is not None
    families = {name.strip().strip('"') for name in named.group(1).split(",")}
    fonts = _platform_fonts(page, "h1")
    cjk = [f for f in fonts if f["familyName"] not in ("DejaVu Sans", "Liberation Sans")]
    assert cjk, f"no CJK font drew the title: {fonts} (install one: apt-get install fonts-wqy-microhei)"
    assert all(f["familyName"] in families for f in cjk), (fonts, families)
    overview = html[html.index('id="overview"') :]
    assert re.search(r"faithfulness</td>\s*<td><span class=\"novalue\">no value</span> <span class=\"sub\">"
                     r"judge failed[^<]*\(12 of 12 queries\)</span>", overview)  # fmt: skip
