"""The report as one self-contained HTML file: styles inline, charts as inline SVG, no script, no link."""

from __future__ import annotations

import datetime
from pathlib import Path

import jinja2
import markupsafe

from ragsql._version import __version__
from ragsql.db.compare import IntervalValue
from ragsql.db.report import HeadlineRow, ReportData, WatchPoint, headline
from ragsql.db.watches import Watch
from ragsql.report import charts

__all__ = ["render_html", "render_watch_html", "write_html", "write_watch_html"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ragsql.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _fmt(value: float | None, digits: int = 4) -> str:
    return "NULL" if value is None else f"{value:.{digits}f}"


def _signed(value: float | None) -> str:
    return "NULL" if value is None else f"{value:+.4f}"


def _value_cell(value: IntervalValue | None, reason: str | None) -> markupsafe.Markup:
    """A value, or "no value" with why."""
    if value is not None and value.value is not None:
        return markupsafe.Markup(f"{value.value:.4f}")
    return markupsafe.Markup('<span class="novalue">no value</span> <span class="sub">{}</span>').format(
        reason or "not computed for this run"
    )


def _tally(rows: list[HeadlineRow], run: str, higher: dict[str, bool]) -> dict[str, int]:
    verdicts = [row.verdict(run, higher.get(row.measure, True)) for row in rows]
    return {"better": verdicts.count("better"), "worse": verdicts.count("worse"), "same": verdicts.count("")}


def render_html(data: ReportData, diffs: dict[str, list[tuple]], higher: dict[str, bool]) -> str:
    """The page of a report."""
    measures = list(dict.fromkeys(v.measure for rows in data.overview.values() for v in rows))
    index = {run: {v.measure: v for v in rows} for run, rows in data.overview.items()}
    judge_of = {v.measure: v.judge_model for rows in data.overview.values() for v in rows if v.judge_model}
    judges = sorted({j for value in judge_of.values() for j in value.split(", ")})
    rows = headline(data)
    rendered = {
        "overview": charts.overview(data.overview),
        "forest": charts.forest(data.comparisons, higher) if data.comparisons else "",
        "heat_map": charts.heat_map(data.per_query) if data.per_query else "",
        "distributions": charts.distributions(data.per_query) if data.per_query else "",
    }
    return _ENV.get_template("report.html.j2").render(
        data=data,
        headline=rows,
        verdicts={run: _tally(rows, run, higher) for run in data.compared},
        value_cell=_value_cell,
        charts=rendered,
        cjk_fonts=charts.CJK_FONTS,
        measures=measures,
        index=index,
        judge_of=judge_of,
        judges=judges,
        diffs=diffs,
        higher=higher,
        fmt=_fmt,
        signed=_signed,
        version=__version__,
        generated=_generated(),
    )


def _generated() -> str:
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def _write(path: Path, page: str) -> Path:
    path = path.expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def write_html(path: Path, data: ReportData, diffs: dict[str, list[tuple]], higher: dict[str, bool]) -> Path:
    """Write the page; returns its absolute path."""
    return _write(path, render_html(data, diffs, higher))


def render_watch_html(watch: Watch, series: dict[str, list[WatchPoint]], empty: str | None) -> str:
    """The page of a watch: each metric over its windows, a chart with its interval band and the table beside it."""
    return _ENV.get_template("watch.html.j2").render(
        watch=watch,
        series=series,
        empty=empty,
        charts={metric: charts.watch_metric(points, f"watch-{i}") for i, (metric, points) in enumerate(series.items())},
        cjk_fonts=charts.CJK_FONTS,
        fmt=_fmt,
        version=__version__,
        generated=_generated(),
    )


def write_watch_html(path: Path, watch: Watch, series: dict[str, list[WatchPoint]], empty: str | None) -> Path:
    """Write the page of a watch; returns its absolute path."""
    return _write(path, render_watch_html(watch, series, empty))
