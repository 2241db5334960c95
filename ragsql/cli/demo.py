"""`ragsql demo`: the whole pipeline on the bundled bilingual corpus, offline, with three retrieval runs compared."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from importlib import resources
from pathlib import Path

import click

from ragsql import db, registry
from ragsql.cli.options import GENERATE_WORKERS, JUDGE_WORKERS, RRF_K, depth_option, top_n_option
from ragsql.cli.output import progress, render, stderr_console
from ragsql.cli.report import write_report
from ragsql.cli.specs import int4
from ragsql.db import diagnostics, generation as generation_db, metrics as metrics_db
from ragsql.db.compare import Resampling
from ragsql.llm.settings import EndpointSettings

__all__ = ["demo_command"]

MODES = ("bm25", "vector", "hybrid")
RETRIEVAL: list[str] = list(registry.HEADLINE_MEASURES)
GENERATION = [m.name for m in registry.METRICS if m.headline]


def _data() -> Path:
    return Path(str(resources.files("ragsql") / "data" / "demo"))


@click.command("demo")
@click.option(
    "--name",
    default="demo",
    show_default=True,
    help="Corpus, dataset and run-name prefix (runs NAME-bm25, NAME-vector, NAME-hybrid).",
)
@depth_option(100, "Results per query (retrieve --k).")
@top_n_option(20, "Results given to the generator as contexts (generate --top-n).")
@click.option("--queries", default=None, type=int4(1), help="Use only the first N questions (quicker).")
@click.option(
    "--report",
    "report_path",
    default=None,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Where to write the HTML report of the three runs (default: RAGSQL_HOME/reports/NAME-report.html).",
)
def demo_command(name: str, k: int, top_n: int, queries: int | None, report_path: Path | None) -> None:
    """Run the whole pipeline offline on a small bundled bilingual corpus and compare three retrievers.

    Ingests ~60 Chinese and English documents (the seeds' examples among them), imports
    56 questions with gold evidence spans and reference answers, runs bm25, vector and
    hybrid retrieval, generates cited answers with the offline extractive generator,
    judges them with the offline judge, prints the metrics side by side with a
    diagnosis of each run, and writes the HTML report of the three runs. No key and no network are needed; every
    generation score is offline. The data stays in the database for psql (`ragsql db url`).
    """
    started = time.perf_counter()
    preload = threading.Thread(target=_preload, name="ragsql-preload", daemon=True)
    preload.start()
    from ragsql.importer import import_records
    from ragsql.ingest import ingest
    from ragsql.retrieve import RunSpec, retrieve_run

    console = stderr_console()
    offline = EndpointSettings()  # no endpoint: everything offline, whatever the environment says
    evalset = _evalset(queries)
    runs = [f"{name}-{mode}" for mode in MODES]
    with db.connect() as conn:
        db.ensure_schema(conn)
        with progress(console, "ingesting the demo corpus", "documents") as on_progress:
            s = ingest(
                conn,
                _data() / "corpus.jsonl",
                name,
                embedder="offline",
                settings=offline,
                strict=True,
                on_progress=on_progress,
            )
        console.print(
            f"ingested corpus {name}: {s.added + s.changed + s.unchanged} documents, "
            f"{s.chunks} new chunks ({s.seconds:.1f} s)"
        )
        import_records(conn, evalset, "jsonl", dataset=name, replace=True)
        conn.commit()
        console.print(f"imported dataset {name}: questions with gold evidence spans and reference answers")
        for mode, run in zip(MODES, runs):
            spec = RunSpec(
                mode=mode,
                k=k,
                candidates=max(50, 2 * k),
                weights={"bm25": 1, "vector": 1, "fuzzy": 1},
                rrf_k=RRF_K,
                expand=0,
            )
            r = retrieve_run(conn, dataset=name, corpus=name, run=run, spec=spec, replace=True, settings=offline)
            console.print(f"retrieved run {run}: {r.results} results for {r.queries} queries ({r.seconds:.1f} s)")
    preload.join()
    from ragsql.generate import generate_answers, make_generator, prepare_run
    from ragsql.orchestrator.runner import judge_run
    from ragsql.orchestrator.setup import make_judging

    _generate_and_judge(
        db.database_url(),
        runs,
        top_n,
        offline,
        console,
        prepare_run,
        make_generator,
        generate_answers,
        make_judging,
        judge_run,
    )
    with db.connect() as conn:
        _print_comparison(conn, runs)
        _print_diagnoses(conn, runs)
        with console.status("writing the report"):
            page = write_report(
                conn,
                runs[0],
                runs[1:],
                report_path or db.data_home() / "reports" / f"{name}-report.html",
                Resampling(2000),
                terminal=False,
            )
    console.print(
        f"report of the three runs (charts, the comparison, the worst queries with their verdicts): {page}",
        soft_wrap=True,
    )
    console.print(
        f'done in {time.perf_counter() - started:.0f} s. The data stays in place: psql "$(ragsql db url)", '
        f"then e.g. select * from ragsql.run_generation where run like '{name}-%';",
        soft_wrap=True,
    )


def _preload() -> None:
    """Import the generator, the judge and the report (jieba's tagger loads with the judge: a second or two) while
    the main thread waits for the embedded server to start and the corpus to load. An import that fails here
    fails again, with its message, where the main thread imports the module."""
    with contextlib.suppress(Exception):
        import ragsql.generate
        import ragsql.orchestrator.runner
        import ragsql.orchestrator.setup
        import ragsql.report  # noqa: F401
        from ragsql.judge.heuristics import meta_words

        meta_words()  # loads jieba's tagger


def _evalset(queries: int | None) -> Path:
    """The bundled eval set, or its first `queries` lines in a temporary file."""
    path = _data() / "evalset.jsonl"
    if queries is None:
        return path
    import tempfile

    lines = path.read_text(encoding="utf-8").splitlines()[:queries]
    handle = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8")
    with handle:
        handle.write("\n".join(lines) + "\n")
    return Path(handle.name)


def _generate_and_judge(
    url, runs, top_n, settings, console, prepare_run, make_generator, generate_answers, make_judging, judge_run
) -> None:
    """Generate and judge each run in turn, with one offline judge: its relevance model embeds each context
    sentence the three runs share once, not once a run."""

    async def go():
        judging = make_judging(settings, offline=True)
        try:
            for run in runs:
                client = make_generator(settings, offline=True)
                try:
                    plan = await prepare_run(url, run, top_n=top_n, replace=True)
                    with progress(console, f"generating {run}", "answers") as on_progress:
                        await generate_answers(plan, client, workers=GENERATE_WORKERS, on_progress=on_progress)
                finally:
                    await client.aclose()
                with progress(console, f"judging {run}", "tasks") as on_progress:
                    await judge_run(url, run, judging, workers=JUDGE_WORKERS, on_progress=on_progress)
                console.print(f"generated and judged run {run} offline")
        finally:
            await judging.judge.aclose()
            await judging.embedder.aclose()

    asyncio.run(go())


def _print_comparison(conn, runs: list[str]) -> None:
    table: dict[str, dict[str, object]] = {m: {"metric": m} for m in RETRIEVAL + GENERATION}
    for run in runs:
        for v in metrics_db.run_values(conn, run, RETRIEVAL, 1):
            table[v.measure][run] = v.value
        for r in generation_db.run_generation(conn, run, GENERATION):
            table[r["metric"]][run] = r["value"]
    rows = [
        {"metric": m + ("" if m in RETRIEVAL else " (offline)"), **{r: row.get(r) for r in runs}}
        for m, row in table.items()
    ]
    render(
        rows,
        ["metric", *runs],
        "table",
        title="retrieval from gold spans; generation judged OFFLINE (heuristic judge, extractive generator)",
    )


def _print_diagnoses(conn, runs: list[str]) -> None:
    for run in runs:
        checks = diagnostics.run_checks(conn, run)
        failed = [c for c in checks if not c["passed"] and not c["check_name"].startswith("queries: ")]
        causes = sorted(
            (c for c in checks if c["check_name"].startswith("queries: ") and not c["passed"]),
            key=lambda c: -c["value"],
        )
        lines = [f"{c['check_name']} {c['value']:.2f} < {c['threshold']:.2f}: {c['advice']}" for c in failed]
        if causes:
            top = causes[0]
            lines.append(
                f"most wrong answers ({top['value']:.0f}): {top['check_name'].removeprefix('queries: ')} — "
                f"{top['advice']}"
            )
        click.echo(f"\n{run}: " + ("no check failed" if not lines else ""))
        for line in lines:
            click.echo(f"  - {line}")
