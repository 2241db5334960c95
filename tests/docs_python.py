"""The Python of one documentation page: blocks read one by one from stdin, run in one shared namespace, each
block's result (what it printed, its traceback) written as a JSON line to the file descriptor in argv[1]."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    """Serve blocks until stdin closes: {"code", "name", "env"} in, {"ok", "out", "err"} out."""
    namespace: dict = {"__name__": "__main__"}
    with os.fdopen(int(sys.argv[1]), "w", encoding="utf-8") as results:
        for line in sys.stdin:
            block = json.loads(line)
            for name, value in block["env"].items():  # the page's endpoint, once the page points at one
                os.environ[name] = value
            out, err, ok = io.StringIO(), io.StringIO(), True
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    exec(compile(block["code"], block["name"], "exec"), namespace)
                except BaseException as exc:  # a block's SystemExit or KeyboardInterrupt is its failure too
                    ok = False
                    # from the block's own frame: this loop's frame says nothing about the page
                    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next, file=err)
            results.write(json.dumps({"ok": ok, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
