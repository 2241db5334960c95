"""The report's charts as inline SVG drawn by matplotlib: no script, no network, nothing to load."""

from __future__ import annotations

import datetime
import io
import math
import warnings
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # no display: draw to files only

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ragsql import registry  # noqa: E402
from ragsql.db.compare import Comparison, IntervalValue  # noqa: E402
from ragsql.db.report import WatchPoint  # noqa: E402

__all__ = ["CJK_FONTS", "distributions", "forest", "heat_map", "overview", "watch_metric"]

# Chinese run names, qids and questions: the page and the charts name the same CJK fallbacks (the first a
# machine has is used); a machine with none draws them with its own fallback, so the layout warning is noise.
CJK_FONTS = ("PingFang SC", "Hiragino Sans GB", "Microsoft YaHei", "Noto Sans CJK SC", "Source Han Sans SC",
             "WenQuanYi Micro Hei")  # fmt: skip
COLORS = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04"]
# Run names, qids and aspect names are user text: drawn literally, never as mathtext ("budget $5_a_b$") or TeX.
plt.rcParams.update(
    {
        "svg.fonttype": "none",
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans", *CJK_FONTS],
        "text.parse_math": False,
        "text.usetex": False,
    }
)


def _svg(figure, name: str) -> str:
    """The figure as an <svg> element whose ids are unique on the page (salted by the chart's name)."""
    buffer = io.StringIO()
    with plt.rc_context({"svg.hashsalt": name}):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)
            figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def overview(values: Mapping[str, Sequence[IntervalValue]]) -> str:
    """Each measure's run value with its interval, one colour per run."""
    measures = list(dict.fromkeys(v.measure for rows in values.values() for v in rows))
    figure, axis = plt.subplots(figsize=(7.5, 0.32 * len(measures) + 1.2))
    step = 0.8 / max(len(values), 1)
    handles = []
    for i, rows in enumerate(values.values()):
        by = {v.measure: v for v in rows}
        ys, xs, lows, highs = [], [], [], []
        for j, m in enumerate(measures):
            v = by.get(m)
            if v is None or v.value is None:
                continue
            ys.append(j - 0.4 + step * (i + 0.5))
            xs.append(v.value)
            # never negative: matplotlib refuses it, and an interval that excludes its value is drawn as a point
            lows.append(max(0.0, v.value - (v.ci_low if v.ci_low is not None else v.value)))
            highs.append(max(0.0, (v.ci_high if v.ci_high is not None else v.value) - v.value))
        handles.append(
            axis.errorbar(
                xs, ys, xerr=[lows, highs], fmt="o", markersize=4, capsize=2, color=COLORS[i % len(COLORS)], linewidth=1
            )
        )
    axis.set_yticks(range(len(measures)), measures)
    axis.invert_yaxis()
    axis.set_xlabel("run value with its 95% bootstrap interval")
    axis.grid(axis="x", alpha=0.3)
    # labels given explicitly: matplotlib leaves out a collected label starting with "_" (a run named "_x")
    axis.legend(
        handles, list(values), loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(len(values), 4), frameon=False
    )
    return _svg(figure, "overview")


def forest(comparisons: Mapping[str, Sequence[Comparison]], higher: dict[str, bool]) -> str:
    """Each measure's difference from the baseline with its interval; filled when significant."""
    rows = [(run, c, c.diff) for run, cs in comparisons.items() for c in cs if c.diff is not None]
    figure, axis = plt.subplots(figsize=(7.5, 0.3 * len(rows) + 1.2))
    for y, (run, c, diff) in enumerate(rows):
        color = COLORS[(list(comparisons).index(run) + 1) % len(COLORS)]
        better = (diff > 0) == higher.get(c.measure, True)
        # an interval bound may be None: matplotlib draws no segment for it
        axis.plot([c.ci_low, c.ci_high], [y, y], color=color, linewidth=1.5)  # pyright: ignore[reportArgumentType]
        axis.plot(
            [diff],
            [y],
            marker="D" if c.significant else "o",
            markersize=5,
            color=color if c.significant else "white",
            markeredgecolor=color,
        )
        if c.significant:
            axis.annotate(
                "better" if better else "worse",
                (c.ci_high, y),
                xytext=(4, -3),
                textcoords="offset points",
                fontsize=7,
                color=color,
            )
    axis.axvline(0, color="#444", linewidth=0.8)
    axis.set_yticks(range(len(rows)), [f"{c.measure} ({run})" for run, c, _ in rows])
    axis.invert_yaxis()
    axis.set_xlabel(
        "difference from the baseline (mean per query) with its 95% bootstrap interval; ◆ significant after Holm"
    )
    axis.grid(axis="x", alpha=0.3)
    return _svg(figure, "forest")


def _scale(measure: str) -> tuple[float, float]:
    """A measure's range as the registry declares it (1..5 for a rubric score); [0, 1] for a retrieval measure."""
    declared = registry.metric_or_none(measure)
    return declared.scale if declared else (0.0, 1.0)


def heat_map(per_query: Sequence[dict]) -> str:
    """Queries × measures, each cell the query's value on its range (grey where there is none)."""
    measures = list(dict.fromkeys(r["measure"] for r in per_query))
    qids = sorted(dict.fromkeys(r["qid"] for r in per_query))
    grid = np.full((len(qids), len(measures)), np.nan)
    index = {q: i for i, q in enumerate(qids)}
    for r in per_query:
        if r["value"] is not None:
            low, high = _scale(r["measure"])
            grid[index[r["qid"]], measures.index(r["measure"])] = (r["value"] - low) / (high - low)
    figure, axis = plt.subplots(figsize=(max(6.0, 0.28 * len(measures) + 2), max(3.0, 0.16 * len(qids) + 1.5)))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#d4d4d4")
    image = axis.pcolormesh(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, edgecolors="white", linewidth=0.2)
    axis.set_xticks(np.arange(len(measures)) + 0.5, measures, rotation=70, ha="right")
    axis.set_yticks(np.arange(len(qids)) + 0.5, qids, fontsize=6)
    axis.invert_yaxis()
    figure.colorbar(image, ax=axis, fraction=0.03, pad=0.02, label="value (grey: none)")
    return _svg(figure, "heatmap")


def distributions(per_query: Sequence[dict], limit: int = 16) -> str:
    """A histogram of each measure's per-query values (the first `limit` measures)."""
    measures = list(dict.fromkeys(r["measure"] for r in per_query))[:limit]
    columns = 4
    rows = math.ceil(len(measures) / columns) or 1
    figure, axes = plt.subplots(rows, columns, figsize=(8, 1.7 * rows), squeeze=False)
    for axis, measure in zip(axes.flat, measures):
        values = [r["value"] for r in per_query if r["measure"] == measure and r["value"] is not None]
        axis.hist(values, bins=10, range=_scale(measure), color=COLORS[0], alpha=0.85)
        missing = sum(1 for r in per_query if r["measure"] == measure and r["value"] is None)
        axis.set_title(measure + (f" ({missing} none)" if missing else ""), fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in list(axes.flat)[len(measures) :]:
        axis.set_visible(False)
    figure.tight_layout()
    return _svg(figure, "distributions")


def watch_metric(points: Sequence[WatchPoint], name: str) -> str:
    """One metric of a watch over its windows: the value at each window's start, its interval as a band, and the
    windows still open drawn hollow (their value may still move); a window without a value leaves a gap."""
    color = COLORS[0]
    # matplotlib's date numbers (days), so that every call below takes plain floats
    starts = np.asarray(mdates.date2num([p.window_start for p in points]), dtype=float)
    # NaN, not a dropped point: the line and the band break where a window has no value
    values = np.array([np.nan if p.value is None else p.value for p in points], dtype=float)
    lows = np.array([np.nan if p.ci_low is None else p.ci_low for p in points], dtype=float)
    highs = np.array([np.nan if p.ci_high is None else p.ci_high for p in points], dtype=float)
    closed = np.array([p.closed for p in points])
    figure, axis = plt.subplots(figsize=(7.5, 2.6))
    band = axis.fill_between(
        starts, lows, highs, where=np.isfinite(lows) & np.isfinite(highs), color=color, alpha=0.2, linewidth=0,
        label="95% bootstrap interval",
    )  # fmt: skip
    band.set_gid(f"{name}-band")
    # the band of a lone window is a line: its interval is drawn as a bar too, so that it shows
    axis.vlines(starts, lows, highs, color=color, alpha=0.5, linewidth=1)
    axis.plot(starts, values, color=color, linewidth=1.2)
    for which, label, face in ((closed, "closed window", color), (~closed, "open window (may still change)", "white")):
        shown = which & np.isfinite(values)
        if shown.any():
            marks = axis.plot(
                starts[shown], values[shown], "o", markersize=5, color=color, markerfacecolor=face, label=label
            )
            marks[0].set_gid(f"{name}-{'closed' if which is closed else 'open'}")
    low, high = _scale(points[0].metric)
    axis.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
    axis.set_ylabel(points[0].metric)
    axis.set_xlabel("window start (UTC)")
    axis.grid(alpha=0.3)
    # half a window either side: a lone window gets an axis of hours or days, not matplotlib's default of years
    window = max(p.window_end - p.window_start for p in points).total_seconds() / 86400
    pad = max(window / 2, (starts[-1] - starts[0]) * 0.03)
    axis.set_xlim(starts[0] - pad, starts[-1] + pad)
    locator = mdates.AutoDateLocator(tz=datetime.timezone.utc)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=datetime.timezone.utc))
    axis.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, frameon=False)
    return _svg(figure, name)
