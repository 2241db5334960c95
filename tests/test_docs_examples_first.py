"""The README's and the first guides' examples run and print what they show (the other half of
tests/test_docs_examples.py's pages, in a file of its own so that the test command's two processes share the pages)."""

from __future__ import annotations

import pytest

from tests.test_docs_examples import demo_replays, fake_endpoint, page_params, run_page  # noqa: F401 (fixtures)


@pytest.mark.parametrize("path", page_params(first=True))
def test_page_examples_run_and_print_what_is_shown(
    path,
    server_url,
    template_url,
    fake_endpoint,  # noqa: F811
    demo_replays,  # noqa: F811
    tmp_path,
):
    """The page's runnable blocks run and print what the page shows (the pages in FIRST_HALF)."""
    run_page(path, server_url, fake_endpoint, demo_replays, tmp_path)
