"""The run report: terminal tables and one self-contained HTML page with charts."""

from ragsql.report.page import write_html

__all__ = ["write_html"]
