"""`retrieve --rerank cross-encoder:MODEL`: a tiny BERT cross-encoder built here (random weights, fixed seed, a
WordPiece vocabulary from the demo corpus) reorders bm25 runs over the demo corpus exactly as its own forward pass
scores the pairs; the run is stored and measured; a model that cannot be loaded or fails stores no run."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import torch  # the extra ragsql[local], which the README's test command and CI install
import transformers

from ragsql.cli import main
from ragsql.errors import InputError, JudgeError
from ragsql.rerank import CrossEncoderReranker, make_reranker
from tests.conftest import DEMO, demo_database, retrieve_cli

DEPTH, K = 20, 5


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide BERT sequence classifier with one label and its tokenizer, saved as a directory."""
    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    text = DEMO.joinpath("corpus.jsonl").read_text(encoding="utf-8").lower()
    words = [w for w, _ in Counter(re.findall(r"[a-z]+", text)).most_common(1500)]
    chars = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,?!'-"))
    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *chars,
        *(f"##{c}" for c in chars),
        *(w for w in words if w not in chars),
    ]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(7)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,
    )
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@functools.lru_cache(maxsize=1)
def _loaded(model_dir: Path) -> tuple:
    return (
        transformers.AutoTokenizer.from_pretrained(model_dir),
        transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval(),
    )


def _scores(model_dir: Path, query: str, texts: list[str]) -> list[float]:
    """sigmoid(logit) of each (query, text) pair by the model's own forward pass over the padded batch."""
    tokenizer, model = _loaded(model_dir)
    encoded = tokenizer(
        [query] * len(texts), texts, truncation="longest_first", max_length=128, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        return torch.sigmoid(model(**encoded).logits[:, 0]).tolist()


def test_cross_encoder_scores_equal_the_models_forward_pass(tiny_model):
    """`rerank` returns one score per document, in order, equal to sigmoid of the model's logit, and no call record."""
    reranker = make_reranker(f"cross-encoder:{tiny_model}")
    query = "how is a vector index built?"
    texts = ["hnsw graphs index vectors", "paris is in france", "张伟是教研部的成员", "x " * 900]
    scores, record = asyncio.run(reranker.rerank(query, texts))
    assert isinstance(reranker, CrossEncoderReranker) and record is None
    assert reranker.request_hash(query, texts) is None  # a local model is never cached
    assert scores == pytest.approx(_scores(tiny_model, query, texts), abs=1e-5)
    assert reranker.name == f"cross-encoder:{tiny_model.resolve()}"
    assert reranker.config == {
        "reranker": "cross-encoder",
        "model": str(tiny_model.resolve()),
        "max_length": 128,
        "activation": "Sigmoid",
    }


def test_cross_encoder_specs_and_load_errors_are_one_line(tiny_model, tmp_path, monkeypatch):
    """A missing model, a directory that holds no model, an unknown kind and a missing extra each fail in one line."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    for spec, match in [
        ("cross-encoder", "name the model"),
        ("cross-encoder:/no/such/model", "no such directory"),
        (f"cross-encoder:{broken}", "cannot load cross-encoder model"),
        (f"cross-encoder:{tmp_path / 'empty'}", "no such directory"),
        ("colbert:x", "unknown reranker"),
    ]:
        with pytest.raises(InputError, match=match) as info:
            make_reranker(spec)
        assert "\n" not in str(info.value)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(
        JudgeError, match=r"needs the optional extra .local.: pip install -e \"\.\[local\]\" in a ragsql checkout$"
    ):
        make_reranker(f"cross-encoder:{tiny_model}")


@pytest.fixture(scope="module")
def demo_url(server_url, template_url):
    """A database with the demo corpus (one chunking, offline embeddings) and the demo eval set."""
    with demo_database(server_url, []) as url:
        yield url


def _retrieve(capsys, run: str, *options: str) -> tuple[int, str, str]:
    return retrieve_cli(capsys, run, "bm25", "--format", "json", *options)


def _results(url: str, run: str) -> dict[int, list[tuple]]:
    """{query_id: [(docno, score, text), ...] in rank order} of a stored run."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select r.query_id, r.docno, r.score, r.text from ragsql.run_result r "
            "join ragsql.run u on u.id = r.run_id where u.name = %s order by 1, r.rank",
            (run,),
        ).fetchall()
    out: dict[int, list[tuple]] = {}
    for query_id, docno, score, text in rows:
        out.setdefault(query_id, []).append((docno, score, text))
    return out


def test_cross_encoder_rerank_orders_as_the_model_scores_and_is_measured(demo, tiny_model, capsys):
    """Each query's top 20 bm25 chunks come back as the top 5 by the model's own scores (ties: bm25 rank), the run
    and its configuration are stored, and ragsql.measure and `metrics` read it."""
    code, _, err = _retrieve(capsys, "base", "--k", str(DEPTH))
    assert code == 0, err
    code, out, err = _retrieve(
        capsys, "ce", "--k", str(K), "--rerank", f"cross-encoder:{tiny_model}", "--rerank-depth", str(DEPTH)
    )
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["queries"], summary["rerank_calls"], summary["rerank_cached"]) == (56, 56, 0)
    assert summary["config"]["rerank"] == f"cross-encoder:{tiny_model}"
    assert summary["config"]["reranker"]["model"] == str(tiny_model.resolve())
    base, reranked = _results(demo, "base"), _results(demo, "ce")
    with psycopg.connect(demo) as conn:
        texts = dict(
            conn.execute(
                "select query_id, text from ragsql.retrieval_query rq join ragsql.run u "
                "on u.id = rq.run_id where u.name = 'ce'"
            ).fetchall()
        )
        stored = conn.execute("select config from ragsql.run where name = 'ce'").fetchone()[0]
        cached = conn.execute("select count(*) from ragsql.judge_call where kind = 'rerank'").fetchone()[0]
        measured = conn.execute(
            "select count(*), min(value), max(value) from ragsql.measure('ce', 'nDCG@10')"
        ).fetchone()
    assert stored["reranker"] == summary["config"]["reranker"] and cached == 0
    assert reranked.keys() == base.keys() and len(base) == 56
    changed = 0
    for query_id, candidates in base.items():
        mine = _scores(tiny_model, texts[query_id], [text for _, _, text in candidates])
        expected = sorted(range(len(candidates)), key=lambda i: (-mine[i], i))[:K]
        got = [docno for docno, _, _ in reranked[query_id]]
        by_docno = {docno: i for i, (docno, _, _) in enumerate(candidates)}
        assert len(got) == len(expected)
        for position, (docno, score, _) in enumerate(reranked[query_id]):
            assert score == pytest.approx(mine[by_docno[docno]], abs=1e-5)
            want = candidates[expected[position]][0]  # near-equal scores may trade places within the tolerance
            assert docno == want or abs(mine[by_docno[docno]] - mine[expected[position]]) < 1e-5, (query_id, got)
        changed += got != [docno for docno, _, _ in candidates[:K]]
    assert changed >= 40  # the model really reorders: most top-5 lists differ from bm25's
    assert measured[0] == 52 and 0 <= measured[1] <= measured[2] <= 1  # 56 questions, 4 unanswerable
    assert main(["metrics", "--run", "ce", "--measures", "nDCG@10 R@5", "--format", "json"]) == 0
    assert {r["measure"] for r in json.loads(capsys.readouterr().out)} == {"nDCG@10", "R@5"}


def test_cross_encoder_failures_store_no_run(demo, tiny_model, tmp_path, capsys, monkeypatch):
    """A model that cannot be loaded, or that fails while scoring, is one error line and leaves no run behind."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    code, _, err = _retrieve(capsys, "bad-load", "--rerank", f"cross-encoder:{broken}")
    assert code == 1 and "cannot load cross-encoder model" in err and len(err.strip().splitlines()) == 1
    code, _, err = _retrieve(capsys, "bad-path", "--rerank", "cross-encoder:./no/such/model")
    assert code == 1 and "no such directory" in err and len(err.strip().splitlines()) == 1

    import sentence_transformers

    def fail(self, *args, **kwargs):
        raise RuntimeError("out of memory\nwhile scoring")

    monkeypatch.setattr(sentence_transformers.CrossEncoder, "predict", fail)
    code, _, err = _retrieve(capsys, "bad-score", "--rerank", f"cross-encoder:{tiny_model}")
    assert code == 1 and "the cross-encoder" in err and "out of memory while scoring" in err
    assert len(err.strip().splitlines()) == 1
    with psycopg.connect(demo) as conn:
        assert conn.execute("select count(*) from ragsql.run where name like 'bad-%'").fetchone()[0] == 0
