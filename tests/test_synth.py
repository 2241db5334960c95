"""`ragsql synth` and ragsql.synth: an eval set written from the demo corpus — offline clozes and an LLM through
the real client — with gold spans that are exact document text, ready for retrieve; the same seed sends nothing."""

from __future__ import annotations

import json

import psycopg
import pytest

import ragsql
from tests.conftest import DEMO, cli_database, cli_json, offline_database, retrieve_cli, run_cli, use_judge
from tests.fake_openai import FakeOpenAI, default_responder


@pytest.fixture(scope="module")
def corpus_url(server_url, template_url):
    with cli_database(server_url, ["ingest", str(DEMO / "corpus.jsonl"), "--corpus", "demo"]) as url:
        yield url


@pytest.fixture
def corpus(corpus_url, monkeypatch):
    return offline_database(monkeypatch, corpus_url)


def _stored(url: str, dataset: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "select q.qid, q.text, q.language, q.metadata ->> 'synth', s.doc_id, s.start_char, s.end_char, "
            "s.quote, d.text, r.text from ragsql.query as q join ragsql.dataset as ds on ds.id = q.dataset_id "
            "join ragsql.gold_span as s on s.query_id = q.id "
            "join ragsql.document as d on d.doc_id = s.doc_id "
            "join ragsql.reference_answer as r on r.query_id = q.id "
            "where ds.name = %s order by q.qid, s.doc_id",
            (dataset,),
        ).fetchall()


def test_offline_synth_writes_clozes_in_both_languages_with_exact_spans(corpus, capsys):
    synth = ["synth", "--corpus", "demo", "--dataset", "syn", "--n", "24", "--kinds", "single,multi", "--offline"]
    synth += ["--seed", "7", "--format", "json"]
    code, out, err = run_cli(capsys, *synth)
    assert code == 0, err
    got = json.loads(out)
    assert got["questions"] == 24 and got["by_kind"] == {"single": 12, "multi": 12}
    assert got["languages"] == ["en", "zh"] and got["failed_calls"] == 0
    rows = _stored(corpus, "syn")
    assert len({r[0] for r in rows}) == 24
    quotes = {}
    for qid, question, language, kind, _doc, start, end, quote, text, _answer in rows:
        assert text[start:end] == quote  # the span is the document's text
        quotes[qid] = quotes.get(qid, "") + quote
        assert question.startswith("填空：" if language == "zh" else "Fill in the blank")
        assert "____" in question and kind in ("single", "multi")
    answers = {r[0]: r[9] for r in rows}
    assert all(part in quotes[q] for q, a in answers.items() for part in a.replace("；", "; ").split("; "))
    multi = [r for r in rows if r[3] == "multi"]
    assert all(sum(r[0] == q for r in multi) == 2 for q in {r[0] for r in multi})  # two spans each

    code, out, _ = run_cli(capsys, *synth)  # the same plan again
    again = json.loads(out)
    assert code == 0 and again["calls"] == 0 and again["cached"] == again["attempts"]  # nothing sent twice
    assert _stored(corpus, "syn") == rows

    code, out, err = retrieve_cli(capsys, "syn-bm25", "bm25", "--format", "json", dataset="syn")
    assert code == 0, err
    code, out, err = run_cli(capsys, "metrics", "--run", "syn-bm25", "--measures", "Success@10", "--format", "json")
    (value,) = json.loads(out)
    assert code == 0 and value["queries"] == 24 and value["value"] > 0.8  # the clozes copy their sentence


def test_questions_near_duplicate_are_dropped_and_the_dry_run_sends_nothing(corpus, capsys):
    from ragsql.judge.lexical import similarity
    from ragsql.synthesis.synthesizer import DUPLICATE

    synth = ("synth", "--corpus", "demo", "--dataset", "dup", "--n", "40", "--offline", "--seed", "1")
    got = cli_json(capsys, *synth)
    questions = [r[1] for r in _stored(corpus, "dup")]
    assert len(set(questions)) == got["questions"] == 40
    assert all(similarity(a, b) < DUPLICATE for i, a in enumerate(questions) for b in questions[i + 1 :])
    plan = cli_json(capsys, *synth, "--dry-run")
    assert plan["dry_run"] and plan["cached"] == 40 and plan["max_requests"] == 120


def test_an_llm_writes_through_the_client_with_a_style_and_every_kind(corpus, capsys, monkeypatch):
    prompts: list[str] = []

    def recording(task, messages, request_json):
        prompts.append(messages[-1]["content"])
        return default_responder(task, messages, request_json)

    with FakeOpenAI(responder=recording) as fake:
        use_judge(monkeypatch, fake, model="fake-writer")
        args = [
            "synth",
            "--corpus",
            "demo",
            "--dataset",
            "llm",
            "--n",
            "9",
            "--kinds",
            "single,multi,comparison",
            "--lang",
            "zh",
            "--style",
            "一位新员工",
            "--format",
            "json",
        ]
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        got = json.loads(out)
        sent = fake.stats()["chat_calls"]
        assert got["questions"] == 9 and got["languages"] == ["zh"] and sent == got["calls"] == 9
        assert got["by_kind"] == {"single": 3, "multi": 3, "comparison": 3}
        assert all("风格：一位新员工" in u and "语言：Chinese" in u for u in prompts)
        rows = _stored(corpus, "llm")
        assert rows and all(r[8][r[5] : r[6]] == r[7] for r in rows)
        assert {len([r for r in rows if r[0] == q]) for q in {r[0] for r in rows if r[3] != "single"}} == {2}
        with psycopg.connect(corpus) as conn:
            models = conn.execute(
                "select distinct q.metadata ->> 'synth_model' from ragsql.query as q join "
                "ragsql.dataset as d on d.id = q.dataset_id where d.name = 'llm'"
            ).fetchall()
        assert models == [("fake-writer",)]
        code, out, _ = run_cli(capsys, *args)
        assert code == 0 and fake.stats()["chat_calls"] == sent  # the same seed: every reply from the cache


def test_bad_replies_are_dropped_with_the_reason(corpus, capsys, monkeypatch):
    def misquoting(task, messages, request_json):
        reply = {
            "question": "Which river is the longest in Asia?",
            "answer": "the Yangtze",
            "evidence": [{"id": "zh-yangtze", "quote": "a sentence the document does not hold"}],
        }
        return json.dumps(reply) if task == "synthesize" else "{}"

    with FakeOpenAI(responder=misquoting) as fake:
        use_judge(monkeypatch, fake, model=None)
        code, out, err = run_cli(
            capsys, "synth", "--corpus", "demo", "--dataset", "bad", "--n", "3", "--format", "json"
        )
    assert code == 3 and "9 of 9 calls failed or gave no usable reply" in err, err  # nothing usable: not a success
    got = json.loads(out)
    assert got["questions"] == 0 and got["attempts"] == 9
    assert sum(got["dropped"].values()) == 9 and all("quote" in k or "no valid reply" in k for k in got["dropped"])
    assert _stored(corpus, "bad") == []


def test_an_endpoint_that_fails_every_call_writes_nothing_and_keeps_what_was_stored(corpus, capsys, monkeypatch):
    code, _, err = run_cli(capsys, "synth", "--corpus", "demo", "--dataset", "down", "--n", "2", "--offline")
    assert code == 0, err
    before = _stored(corpus, "down")
    with FakeOpenAI() as fake:
        use_judge(monkeypatch, fake, model=None)
        fake.fault_mix({"400": 1.0}, on="any")  # refused at once, every call
        code, out, err = run_cli(
            capsys, "synth", "--corpus", "demo", "--dataset", "down", "--n", "2", "--seed", "9", "--format", "json"
        )
    got = json.loads(out)  # the report still comes, and the exit status says calls failed
    assert code == 3 and got["questions"] == 0 and got["failed_calls"] == got["attempts"] == 6
    assert "6 of 6 calls failed or gave no usable reply (exit 3)" in err
    assert all(k.startswith("no valid reply") for k in got["dropped"]) and "Traceback" not in err
    assert _stored(corpus, "down") == before and before  # another seed's questions stay


@pytest.mark.parametrize(
    "args, code, text",
    [
        (["--corpus", "nope", "--dataset", "x", "--offline"], 1, 'unknown corpus "nope"'),
        (["--corpus", "demo", "--dataset", "x", "--n", "0", "--offline"], 2, "--n"),
        (["--corpus", "demo", "--dataset", "x", "--kinds", "trivia", "--offline"], 2, "choose from single"),
        (
            ["--corpus", "demo", "--dataset", "x", "--kinds", "comparison", "--offline"],
            1,
            "comparison questions need an LLM",
        ),
    ],
)
def test_bad_options_are_one_line(corpus, capsys, args, code, text):
    got, _, err = run_cli(capsys, "synth", *args)
    assert got == code and text in err and len(err.strip().splitlines()) == 1


def test_the_python_api_synthesizes_as_the_cli(corpus):
    result = ragsql.synth("demo", "api-syn", n=6, kinds=["single"], offline=True, seed=2, lang="en")
    assert len(result.questions) == 6 and {q.language for q in result.questions} == {"en"}
    rows = _stored(corpus, "api-syn")
    assert [(r[0], r[1]) for r in rows] == [(q.qid, q.question) for q in result.questions for _ in q.spans]
    with pytest.raises(ragsql.InputError, match="unknown corpus"):
        ragsql.synth("nope", "x", offline=True)
    with pytest.raises(ragsql.InputError, match="n must be 1 or more"):
        ragsql.synth("demo", "x", n=0, offline=True)
