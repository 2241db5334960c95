"""ragsql's flows on the distributed layout (Citus) give what they give on one server, and trec_eval's values."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.citus.conftest import Side
from tests.conftest import RAGAS_LATER

ROOT = Path(__file__).resolve().parents[2]
TREC = ROOT / "tests" / "data" / "trec"
EXPECTED = json.loads((TREC / "expected.json").read_text())["pairs"]
EXAMPLE = ROOT / "ragsql" / "data" / "example_evalset.jsonl"
MEASURES = {
    "P_5": "P@5",
    "P_10": "P@10",
    "recall_10": "R@10",
    "recip_rank": "RR",
    "ndcg_cut_10": "nDCG@10",
    "map": "AP",
    "Rprec": "Rprec",
    "success_5": "Success@5",
}
RUN_TABLES = [
    "answer",
    "run_result",
    "answer_context",
    "statement_verdict",
    "context_verdict",
    "context_sentence_verdict",
    "generated_question",
    "rating",
    "aspect_verdict",
    "citation_verdict",
    "judge_task",
    "retrieval_run",
    "retrieval_query",
    "review_label",
    "statement_attribution",
    "run_embedder",
    "graded_verdict",
    "rubric_verdict",
    "yes_no_verdict",
    "run_calls",
]
# generation metrics that run on the distributed layout today (docs/guides/citus.md: what does not yet)
GENERATION = [
    "faithfulness",
    "contradiction_rate",
    "context_recall",
    "answer_similarity",
    "answer_correctness_f1",
    "answer_correctness",
]


def test_distribute_puts_run_tables_by_run_id_in_one_group_and_is_repeatable(citus):
    """Run-scoped tables are hash-distributed by run_id in one co-location group, the dataset tables are reference
    tables, the corpus stays on the coordinator; db init --distribute and db init again change nothing."""
    layout = (
        "select c.relname, p.partmethod, p.colocationid, column_to_column_name(p.logicalrelid, p.partkey) "
        "from pg_dist_partition as p join pg_class as c on c.oid = p.logicalrelid order by 1"
    )
    before = citus.rows(layout)
    hashed = {name: (group, column) for name, method, group, column in before if method == "h"}
    assert sorted(hashed) == sorted(RUN_TABLES)
    assert {v for v in hashed.values()} == {(hashed["answer"][0], "run_id")}
    # a table a later migration adds with a run_id column belongs in citus.sql's run tables too
    with_run_id = {
        name
        for (name,) in citus.rows(
            "select c.table_name from information_schema.columns as c join information_schema.tables as t "
            "using (table_schema, table_name) where c.table_schema = 'ragsql' and c.column_name = 'run_id' "
            "and t.table_type = 'BASE TABLE'"
        )
    }
    # but a watch's window (one row naming the run it fills, read by the watcher) is a reference table like run
    assert with_run_id - {"watch_window"} == set(hashed), with_run_id ^ set(hashed)
    reference = {name for name, method, _, _ in before if method == "n"}
    assert {
        "dataset",
        "query",
        "judgment",
        "run",
        "judge_call",
        "judge_call_claim",
        "entity_extraction",
        "rubric",
    } <= reference
    assert not {"corpus", "chunk", "chunk_term", "bm25_list"} & {name for name, *_ in before}
    assert "distributed on Citus" in citus.cli("db", "init", "--distribute").stdout
    assert "distributed on Citus" in citus.cli("db", "init").stdout
    for script in ("install.sql", "citus.sql"):  # as a DBA upgrades with psql
        done = subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(ROOT / "sql" / script), citus.url],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    assert citus.rows(layout) == before


def test_distribute_on_one_server_says_so_in_one_line(single):
    """--distribute on a server without Citus exits 1 with one line naming the problem, and installs nothing new."""
    done = single.cli("db", "init", "--distribute", ok=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "ragsql: error: --distribute needs a Citus coordinator: this database has no citus extension (one server "
        "needs only `ragsql db init`)"
    ]


@pytest.mark.parametrize("pair", ["trec_eval.test", "cast2021.org_manual_bm25"])
def test_import_trec_and_metrics_equal_trec_eval_and_one_server(citus, single, pair):
    """import trec then metrics: per-query values equal the embedded server's exactly and run means trec_eval's."""
    expected = EXPECTED[pair]
    args = (
        "import",
        "trec",
        "--dataset",
        pair,
        "--qrels",
        str(TREC / expected["qrels"].removeprefix("data/")),
        "--file",
        str(TREC / expected["run"].removeprefix("data/")),
        "--run",
        pair,
    )
    per_query, means = {}, {}
    for side in (citus, single):
        side.cli(*args)
        measures = ",".join(MEASURES.values())
        per_query[side.name] = {
            (r["qid"], r["measure"]): r["value"]
            for r in side.json("metrics", "--run", pair, "--measures", measures, "--per-query")
        }
        means[side.name] = {
            r["measure"]: r["value"] for r in side.json("metrics", "--run", pair, "--measures", measures)
        }
    assert per_query["citus"] == per_query["single"]
    assert len(per_query["citus"]) == len(MEASURES) * len(
        expected["per_query"] | dict.fromkeys(expected["queries"]["in_qrels_not_in_run"])
    )
    differences = [
        (name, want, means["citus"][ours])
        for name, ours in MEASURES.items()
        if abs((want := expected["mean_complete"][name]) - means["citus"][ours]) > 1e-9
    ]
    assert not differences


def _generation(side, run: str) -> dict[tuple[str, str], tuple]:
    return {
        (metric, qid): (value, reason)
        for metric in GENERATION
        for qid, value, reason in side.rows(
            "select qid, value, reason from ragsql.generation_measure(%s, %s)", (run, metric)
        )
    }


def test_import_eval_set_and_offline_judge_store_the_same_verdicts_and_scores(citus, single):
    """import jsonl + judge --offline (on the cluster two judge processes at once, as on two machines): the same
    tasks, verdict rows and generation metric values on both layouts, every task done by exactly one process."""
    counts = {}
    for side in (citus, single):
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "ex", "--run", "ex1")
        judge = ("judge", "--run", "ex1", "--offline", "--embedder", "offline", "--workers", "2", "--format", "json")
        if side is citus:
            outputs: list[dict] = []
            processes = [
                threading.Thread(
                    target=lambda cli=side.cli, args=judge, out=outputs: out.append(json.loads(cli(*args).stdout))
                )
                for _ in range(2)
            ]
            for process in processes:
                process.start()
            for process in processes:
                process.join(timeout=300)
            done = [o["done"] for o in outputs]
        else:
            done = [json.loads(side.cli(*judge).stdout)["done"]]
        assert sum(done) == 96, done
        counts[side.name] = side.rows(
            "select (select count(*) from ragsql.judge_task where status = 'done'), "
            "(select count(*) from ragsql.statement_verdict), (select count(*) from ragsql.context_verdict), "
            "(select count(*) from ragsql.generated_question), (select count(*) from ragsql.aspect_verdict)"
        )
    assert counts["citus"] == counts["single"]
    assert counts["citus"][0][0] > 0 and counts["citus"][0][1] > 0
    got, want = _generation(citus, "ex1"), _generation(single, "ex1")
    assert len(got) == len(GENERATION) * 12
    assert sum(v is not None for v, _ in got.values()) > 0
    # cosines are float4 sums in pgvector, whose build here (0.8.1, PostgreSQL 15) and the embedded one's add in
    # another order: the embedding metrics agree to 1e-7, every other value and every reason exactly
    assert got.keys() == want.keys()
    differences = [
        (key, got[key], want[key])
        for key in got
        if got[key][1] != want[key][1]
        or (got[key][0] is None) != (want[key][0] is None)
        or got[key][0] is not None
        and abs(got[key][0] - want[key][0]) > (1e-6 if key[0] in ("answer_similarity", "answer_correctness") else 0)
    ]
    assert not differences, differences[:5]


def test_ragas_id_only_records_score_the_same_on_both_layouts(citus, single, tmp_path):
    """RAGAS records giving retrieved_context_ids without texts, beside one with texts, judged offline: RAGAS's id
    metrics, and the NULL (with its reason) of the metrics that read texts, the same on both layouts."""
    by_ids = [
        {"qid": "i1", "user_input": "q1", "response": "a", "retrieved_context_ids": ["d3", "d1", "d2"],
         "reference_context_ids": ["d2"]},
        {"qid": "i2", "user_input": "q2", "response": "b", "retrieved_context_ids": ["d7", "d7"],
         "reference_context_ids": ["d7", "d8"]},
    ]  # fmt: skip
    path = tmp_path / "ids.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in by_ids) + EXAMPLE.read_text("utf-8").splitlines()[0])
    metrics = ["faithfulness", "context_precision", "id_based_context_precision", "id_based_context_recall",
               "non_llm_context_recall"]  # fmt: skip
    values = {}
    for side in (citus, single):
        side.cli("import", "jsonl", str(path), "--dataset", "ids", "--run", "ids")
        side.cli("judge", "--run", "ids", "--offline", "--metrics", "faithfulness,context_precision")
        values[side.name] = {
            (metric, qid): (value, reason)
            for metric in metrics
            for qid, value, reason in side.rows(
                "select qid, value, reason from ragsql.generation_measure(%s, %s)", ("ids", metric)
            )
        }
    assert values["citus"] == values["single"]
    got = values["citus"]
    assert [got[m, "i1"][0] for m in metrics[2:4]] + [got[m, "i2"][0] for m in metrics[2:4]] == [1 / 3, 1, 1, 1 / 2]
    for metric in ("faithfulness", "context_precision", "non_llm_context_recall"):
        assert got[metric, "i1"] == got[metric, "i2"] == (None, "no context texts: the record gives only ids")


def test_judge_queue_two_workers_share_a_run_without_overlap(citus):
    """Two workers claiming from one run's queue on the cluster never get the same task, and every task is done."""
    citus.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exq", "--run", "q1")
    ((rid,),) = citus.rows("select id from ragsql.run where name = 'q1'")
    with psycopg.connect(citus.url) as conn:
        added = conn.execute(
            "select ragsql._enqueue_judge_tasks(%s, array['faithfulness', 'context_recall', 'answer_relevancy'])",
            (rid,),
        ).fetchone()[0]
        conn.commit()
    assert added == 36
    claimed: dict[str, list[int]] = {"w1": [], "w2": []}
    waits: list[float] = []

    def work(name: str) -> None:
        with psycopg.connect(citus.url) as conn:
            while True:
                started = time.perf_counter()
                rows = conn.execute("select id from ragsql._claim_judge_tasks(%s, %s, 2)", (rid, name)).fetchall()
                waits.append(time.perf_counter() - started)
                if not rows:
                    conn.commit()
                    return
                for (task_id,) in rows:
                    assert conn.execute(
                        "select ragsql._renew_judge_lease(%s, %s, %s)", (rid, task_id, name)
                    ).fetchone()[0]
                    assert conn.execute(
                        "select ragsql._finish_judge_task(%s, %s, %s)", (rid, task_id, name)
                    ).fetchone()[0]
                conn.commit()
                claimed[name].extend(task_id for (task_id,) in rows)

    threads = [threading.Thread(target=work, args=(name,)) for name in claimed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    every = claimed["w1"] + claimed["w2"]
    assert len(every) == len(set(every)) == 36
    assert citus.rows("select status, count(*) from ragsql.judge_task where run_id = %s group by status", (rid,)) == [
        ("done", 36)
    ]
    assert max(waits) < 1.0, f"a claim waited {max(waits):.2f} s"


def _close(a, b, tol: float = 1e-6) -> bool:
    """Equal, floats to tol (pgvector's float4 sums add in another order on the two builds)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= tol
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    return a == b


def test_judge_with_the_fake_openai_endpoint_stores_the_same_scores(citus, single):
    """judge against an OpenAI-compatible endpoint (tests/fake_openai.py) then scores: the same calls, verdicts and
    scores on both layouts."""
    from tests.fake_openai import FakeOpenAI

    scores = {}
    with FakeOpenAI() as fake:
        for side in (citus, single):
            side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exf", "--run", "f1")
            env = dict(
                side.env,
                RAGSQL_JUDGE_BASE_URL=fake.base_url,
                RAGSQL_JUDGE_API_KEY="test-key",
                RAGSQL_JUDGE_MODEL="fake-judge",
            )
            remote = Side(side.name, env, side.url)
            remote.cli("judge", "--run", "f1", "--embedder", "offline", "--workers", "4")
            scores[side.name] = [r for r in remote.json("scores", "--run", "f1") if r["kind"] == "generation"]
    assert [r["measure"] for r in scores["citus"]] == [r["measure"] for r in scores["single"]]
    assert any("fake-judge" in (r.get("source") or "") for r in scores["citus"])
    assert _close(scores["citus"], scores["single"])


def test_retrieve_fuse_and_generate_on_a_small_corpus(citus, plain):
    """ingest + retrieve (bm25, vector, hybrid) + fuse + generate: the same ranked rows and measures as one server
    of the same PostgreSQL (15; the embedded 18's English stemmer makes other BM25 terms). Judging is tested above."""
    demo = ROOT / "ragsql" / "data" / "demo"
    ranked, values = {}, {}
    for side in (citus, plain):
        side.cli("ingest", str(demo / "corpus.jsonl"), "--corpus", "demo", "--embedder", "offline")
        side.cli("import", "jsonl", str(demo / "evalset.jsonl"), "--dataset", "demo")
        for mode in ("bm25", "vector", "hybrid"):
            side.cli("retrieve", "--dataset", "demo", "--corpus", "demo", "--run", f"demo-{mode}", "--mode", mode)
        side.cli("fuse", "--runs", "demo-bm25,demo-vector", "--run", "demo-fused")
        side.cli("generate", "--run", "demo-hybrid", "--offline")
        ranked[side.name] = side.rows(
            "select ru.name, q.qid, r.rank, r.docno, r.score from ragsql.run_result as r "
            "join ragsql.run as ru on ru.id = r.run_id join ragsql.query as q on q.id = r.query_id "
            "where ru.name like 'demo-%%' order by 1, 2, 3"
        )
        values[side.name] = {
            run: side.json("metrics", "--run", run) for run in ("demo-bm25", "demo-vector", "demo-fused")
        }
        values[side.name]["demo-hybrid"] = side.json("scores", "--run", "demo-hybrid")  # text metrics of the answers
    assert len(ranked["citus"]) > 1000
    assert ranked["citus"] == ranked["plain"]
    # run means add the same per-query values in another order (last bits of a float8)
    differences = [
        (run, a, b)
        for run in values["citus"]
        for a, b in zip(values["citus"][run], values["plain"][run])
        if not _close(a, b, 1e-12)
    ]
    assert [len(v) for v in values["citus"].values()] == [len(v) for v in values["plain"].values()]
    assert not differences, differences[:3]


def test_compare_diagnose_report_check_and_delete_read_the_same_on_both_layouts(citus, single, tmp_path):
    """compare (bootstrap, randomization test), diagnose, report, check, list and delete give the same output."""
    out = {}
    for side in (citus, single):
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exc", "--run", "c1")
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exc", "--run", "c2")
        for run in ("c1", "c2"):
            side.cli("judge", "--run", run, "--offline", "--embedder", "offline")
        out[side.name] = {
            # a measure of each family (the default list takes a minute here, on either layout)
            "compare": side.json(
                "compare",
                "c1",
                "c2",
                "--resamples",
                "500",
                "--measures",
                "nDCG@10,faithfulness,context_precision,answer_similarity,rouge_l,aspect:coherence",
            ),
            "diagnose": side.json("diagnose", "--run", "c1"),
            "report": side.cli(
                "report", "--run", "c1", "--resamples", "200", "--html", str(tmp_path / f"report-{side.name}.html")
            ).stdout,
            "check": side.cli(
                "check", "--run", "c2", "--baseline", "c1", "--min", "faithfulness=0.5", "--format", "json", ok=False
            ).stdout,
        }
        assert (tmp_path / f"report-{side.name}.html").stat().st_size > 10_000
        deleted = side.cli("delete", "run", "c2", "--yes").stdout
        assert deleted.startswith("deleted run c2 (27 results, 12 answers")
        assert side.rows(
            "select count(*) from ragsql.answer as a join ragsql.run as r on r.id = a.run_id where r.name = 'c2'"
        ) == [(0,)]
    assert out["citus"]["compare"] and _close(out["citus"]["compare"], out["single"]["compare"])
    assert _close(out["citus"]["diagnose"], out["single"]["diagnose"])
    # compared up to the cost table (the calls' latencies differ between layouts) or the page's path
    head = {
        name: re.split(r"cost \(the calls sent for these runs\)|report written to", o["report"])[0]
        for name, o in out.items()
    }
    assert "diagnosis of c1" in head["citus"] and head["citus"] == head["single"]
    assert _close(json.loads(out["citus"]["check"]), json.loads(out["single"]["check"]))


def test_review_sheet_labels_agreement_and_ppi_are_the_same_on_both_layouts(citus, single, tmp_path):
    """review export + the same labels imported: the same sheet, agreement statistics and PPI estimates."""
    from tests.test_review import fill

    out = {}
    for side in (citus, single):
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exr", "--run", "r1")
        side.cli("judge", "--run", "r1", "--offline", "--embedder", "offline")
        sheet_path = tmp_path / f"sheet-{side.name}.jsonl"
        side.cli(
            "review",
            "export",
            "--run",
            "r1",
            "--sample",
            "12",
            "--stratify",
            "faithfulness",
            "--output",
            str(sheet_path),
        )
        sheet = [json.loads(line) for line in sheet_path.read_text().splitlines()]
        labelled = tmp_path / f"labelled-{side.name}.jsonl"
        labelled.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fill(sheet, 7, "ann")))
        side.cli("review", "import", str(labelled))
        out[side.name] = (
            sheet,
            side.rows("select * from ragsql.judge_agreement('r1')"),
            side.rows("select * from ragsql.ppi_mean('r1', 'faithfulness')"),
        )
    assert len(out["citus"][0]) == 12 and len(out["citus"][1]) > 0
    assert _close(out["citus"][0], out["single"][0])
    # the embedding metrics' judge values differ in the 7th digit (pgvector's float4 sums), the statistics with them
    for got, want in ((out["citus"][1], out["single"][1]), (out["citus"][2], out["single"][2])):
        differences = [(a, b) for a, b in zip(got, want) if not _close(list(a), list(b))]
        assert len(got) == len(want) and not differences, differences[:3]


def test_a_user_aspect_is_judged_scored_and_removed_with_its_verdicts(citus, single):
    """aspect add + judge aspect_critique + scores + aspect remove: the same values and verdict count."""
    out = {}
    for side in (citus, single):
        side.cli("aspect", "add", "cites", "--definition", "Does the answer name its source?")
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exa", "--run", "a1")
        side.cli("judge", "--run", "a1", "--offline", "--embedder", "offline", "--metrics", "aspect_critique")
        scores = [r for r in side.json("scores", "--run", "a1") if r["measure"] == "aspect:cites"]
        out[side.name] = (scores, side.cli("aspect", "remove", "cites", "--yes").stdout)
    assert out["citus"][0] and out["citus"] == out["single"]
    assert out["citus"][1].strip() == "removed aspect cites (12 verdicts)"


def test_ragas_later_metrics_are_judged_and_scored_the_same_on_both_layouts(citus, single):
    """judge --offline of RAGAS's later metrics (two-pass ratings, entities, claims, per-context support, rubrics)
    + scores: every value, count and per-query reason equal on both layouts (the verdict tables distributed by run)."""
    out = {}
    for side in (citus, single):
        side.cli("import", "jsonl", str(EXAMPLE), "--dataset", "exrg", "--run", "rg1")
        side.cli("judge", "--run", "rg1", "--offline", "--embedder", "offline", "--metrics", " ".join(RAGAS_LATER))
        out[side.name] = sorted(
            (r["measure"], r["value"], r["covered"], r["missing"])
            for r in side.json("scores", "--run", "rg1")
            if r["measure"].startswith(RAGAS_LATER)
        )
    assert len(out["citus"]) == 10 and all(value is not None for _, value, _, _ in out["citus"]), out["citus"]
    assert out["citus"] == out["single"]
    for call in (
        "response_groundedness('rg1')",
        "nv_context_relevance('rg1')",
        "context_entity_recall('rg1')",
        "factual_correctness('rg1', 'recall')",
        "noise_sensitivity('rg1', 'irrelevant')",
        "rubrics_score('rg1', 'default')",
    ):
        query = f"select qid, value, reason from ragsql.{call} order by qid"
        assert citus.rows(query) == single.rows(query), call
