"""The run and watch reports: terminal tables and one self-contained HTML page with charts."""

from ragsql.report.page import write_html, write_watch_html

__all__ = ["write_html", "write_watch_html"]
