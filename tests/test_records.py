"""Eval-set records from JSONL and CSV: every accepted field spelling and every kind of malformed input."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest

from ragsql.errors import InputError
from ragsql.formats import context_docno, parse_records

DATA = Path(__file__).resolve().parent / "data"


def read(name: str, fmt: str = "jsonl") -> list:
    with open(DATA / name, encoding="utf-8", newline="") as handle:
        return list(parse_records(handle, fmt, name))


def jsonl(*objects: object) -> list[str]:
    return [o if isinstance(o, str) else json.dumps(o, ensure_ascii=False) for o in objects]


def one(obj: dict):
    (record,) = parse_records(jsonl(obj), "jsonl", "t.jsonl")
    return record


def test_ragas_new_fields_are_normalised():
    """RAGAS user_input/retrieved_contexts/reference_contexts/response/reference map onto one record each."""
    first, second, third = read("ragas_new.jsonl")
    assert (first.qid, first.query, first.answer) == ("q1", "What is RAG?", "RAG is retrieval-augmented generation.")
    assert first.references == ("RAG combines retrieval with generation to ground an LLM's answers.",)
    # The reference context differs only in whitespace, so it gets the docno of the retrieved context.
    assert first.judgments[0][:2] == (first.retrieved[0][0], 1)
    assert first.retrieved[0][0].startswith("ctx:")
    assert first.retrieved[1][1:] == (None, "Python is a programming language.")
    assert second.retrieved == (
        ("emb#1", 0.92, "Consider language support, dimension, speed and cost."),
        ("emb#2", 0.81, "BGE models work well for Chinese."),
    )
    assert second.judgments == (("emb#1", 1, "Consider language support, dimension, speed and cost."),)
    assert third.retrieved == (
        ("chunk#3", 3.5, "Chunking splits long documents into small pieces."),
        ("chunk#9", 1.25, None),
    )
    assert third.metadata == {"rubrics": {"score1": "wrong"}}


def test_ragas_old_fields_are_normalised():
    """Old RAGAS question/contexts/answer/ground_truth and the list ground_truths are accepted."""
    first, second = read("ragas_old.jsonl")
    assert first.query == "什么是 RAG？" and first.answer.startswith("RAG 是检索增强生成技术")
    assert first.references == ("RAG 是一种结合检索和生成的技术，用于增强 LLM 的回答。",)
    assert first.retrieved == ((context_docno(first.retrieved[0][2]), None, first.retrieved[0][2]),)
    assert second.references == (
        "选择 Embedding 模型需考虑语言、维度、性能和成本，中文推荐 BGE。",
        "中文推荐 BGE 系列。",
    )


def test_seed_fields_with_graded_rel_map():
    """The seed's qid/query/gold_evidence/rel_map/retrieved/gold_answer give graded judgments and ranked ids."""
    first, second = read("seed.jsonl")
    assert first.qid == "q_001" and first.query == "报销流程中差旅标准怎么规定?"
    assert first.judgments == (("c2", 2, None), ("c3", 1, None))
    assert [docno for docno, _, _ in first.retrieved] == ["c7", "c2", "c9", "c1"]
    assert second.judgments == (("c6", 2, None),) and second.references == ("张伟是教研部的成员",)


def test_rel_map_adds_items_missing_from_gold_evidence_and_keeps_zero_grades():
    """gold_evidence ids get relevance 1 unless rel_map grades them; rel_map-only ids are added with their grade."""
    record = one({"qid": "a", "gold_evidence": ["d1", 7], "rel_map": {"7": 3, "d9": 0, "d8": -1}})
    assert record.judgments == (("d1", 1, None), ("7", 3, None), ("d9", 0, None), ("d8", -1, None))


def test_aliases_language_metadata_and_peer_fields():
    """id/query_id alias qid, lang aliases language; RAGAS's and DeepEval's fields no metric reads join metadata."""
    a = one({"id": 12, "query": "x", "lang": "zh", "metadata": {"topic": "hr"}, "rubrics": {"score1": "bad"}})
    b = one({"query_id": "Q-2", "question": "y", "language": "en", "tags": ["t"], "flaky": False})
    assert (a.qid, a.language, a.metadata) == ("12", "zh", {"topic": "hr", "rubrics": {"score1": "bad"}})
    assert (b.qid, b.language, b.metadata) == ("Q-2", "en", {"tags": ["t"], "flaky": False})


def test_deepeval_fields_read_as_ragas_fields():
    """DeepEval's input / actual_output / retrieval_context / expected_output / context give the record RAGAS's
    user_input / response / retrieved_contexts / reference / reference_contexts give."""
    ragas = {
        "user_input": "What is RAG?",
        "response": "Retrieval plus generation.",
        "retrieved_contexts": ["RAG retrieves.", "Python is a language."],
        "reference": "Retrieval-augmented generation.",
        "reference_contexts": ["RAG retrieves."],
    }
    renamed = ("input", "actual_output", "retrieval_context", "expected_output", "context")
    deepeval = dict(zip(renamed, ragas.values()))
    record = one(deepeval)
    assert record == one(ragas)
    assert record.judgments == ((context_docno("RAG retrieves."), 1, "RAG retrieves."),)
    assert [r.text for r in record.retrieved] == ["RAG retrieves.", "Python is a language."]
    text = "input,actual_output,retrieval_context,expected_output,context\n" + ",".join(
        f'"{json.dumps(v).replace(chr(34), chr(34) * 2)}"' if isinstance(v, list) else v for v in deepeval.values()
    )
    (from_csv,) = parse_records(io.StringIO(text, newline=""), "csv", "d.csv")
    assert from_csv == dataclasses.replace(record, line=2, qid="q2")


def test_ragas_id_based_records_need_no_texts():
    """retrieved_context_ids and reference_context_ids alone (RAGAS's id-based context metrics) give the ranked ids
    and the gold ids."""
    record = one({"user_input": "q", "response": "a", "retrieved_context_ids": ["d1", 2], "reference_context_ids": [2]})
    assert record.retrieved == (("d1", None, None), ("2", None, None))
    assert record.judgments == (("2", 1, None),)
    with pytest.raises(InputError, match=r"^t.jsonl:1: reference_context_ids lists 'd1' twice"):
        one({"user_input": "q", "reference_context_ids": ["d1", "d1"]})


def test_ragas_own_id_samples_need_no_question_no_qid_and_no_response():
    """RAGAS's documented id-based samples (the two id lists alone) are read, their qid q<line> (blank lines count);
    context_ids marks ids without texts (stored as an answer even with no response), not ids beside their texts nor
    another spelling of a ranking; a record with nothing to evaluate is still an error."""
    sample = {"retrieved_context_ids": ["doc_1", "doc_2"], "reference_context_ids": ["doc_1", "doc_4"]}
    first, second = parse_records([json.dumps(sample), "", json.dumps(sample)], "jsonl", "t.jsonl")
    assert (first.qid, first.query, first.answer, first.context_ids) == ("q1", None, None, True)
    assert second.qid == "q3" and second.judgments == (("doc_1", 1, None), ("doc_4", 1, None))
    assert one({"retrieved_context_ids": [], "reference_context_ids": []}).context_ids  # stored: NULL, a reason
    assert not one({"retrieved_context_ids": ["d1"], "retrieved_contexts": ["one"]}).context_ids
    assert not one({"retrieved_ids": ["d1"]}).context_ids
    with pytest.raises(InputError, match=r"^t.jsonl:1: record has no query text .*, no qid and nothing to evaluate$"):
        one({"metadata": {"source": "x"}})


def test_ragas_ids_alone_may_repeat_ids_with_texts_may_not():
    """An id repeated in RAGAS's retrieved_context_ids alone is kept at each position (RAGAS reads the ids as a set);
    with the contexts' texts beside them, or in another spelling of a ranking, it is still an error naming both."""
    record = one({"user_input": "q", "retrieved_context_ids": ["d1", "d2", "d1"]})
    assert [r.docno for r in record.retrieved] == ["d1", "d2", "d1"]
    with pytest.raises(InputError, match=r"^t.jsonl:1: retrieved item 'd1' appears twice \(positions 1 and 3\)"):
        one({"user_input": "q", "retrieved_context_ids": ["d1", "d2", "d1"], "retrieved_contexts": ["a", "b", "c"]})
    with pytest.raises(InputError, match=r"^t.jsonl:1: retrieved item 'd1' appears twice"):
        one({"user_input": "q", "retrieved_ids": ["d1", "d2", "d1"]})


def test_retrieved_ids_scores_and_objects_combine_by_position():
    """retrieved_ids and retrieved_scores run parallel to the contexts; objects may give id, score and text."""
    record = one(
        {
            "query": "q",
            "retrieved_contexts": ["t1", {"text": "t2"}, "t3"],
            "retrieved_ids": ["d1", {"id": "d2", "score": 0.5}, None],
            "retrieved_scores": [0.9, None, 0.1],
        }
    )
    assert record.retrieved == (("d1", 0.9, "t1"), ("d2", 0.5, "t2"), (context_docno("t3"), 0.1, "t3"))


def test_missing_qid_is_q_and_line_number():
    """A record without a qid gets 'q<line>', so importing the same file twice gives the same ids."""
    records = list(parse_records(["", json.dumps({"query": "a"}), json.dumps({"qid": "q9", "query": "b"})], "jsonl"))
    assert [r.qid for r in records] == ["q2", "q9"]


def test_context_docno_normalises_whitespace():
    """Contexts that differ only in whitespace share one ctx: docno of 16 hex digits."""
    assert context_docno(" a  b\n c ") == context_docno("a b c")
    assert context_docno("a b c") != context_docno("abc") and len(context_docno("x")) == 4 + 16


def test_csv_cells_json_arrays_plain_cells_and_line_numbers():
    """CSV list cells are JSON arrays or one plain element; blank cells are absent; lines count quoted newlines."""
    r1, r2, r3 = read("evalset.csv", "csv")
    assert (r1.qid, r1.line, r1.language, r1.metadata) == ("r1", 2, "en", {"source": "handmade"})
    assert r1.retrieved == (
        ("geo#1", 0.9, "Earth's rotation causes day and night."),
        ("astro#4", 0.4, "The solar system has eight planets."),
    )
    assert r1.judgments == (("geo#1", 1, None),) and r1.references == ("Day and night, and the wind pattern.",)
    assert r2.retrieved == (("vdb#1", 0.75, "A vector database stores embeddings,\nand searches them by similarity."),)
    assert (r3.line, r3.retrieved, r3.answer, r3.judgments) == (5, (), "I do not know.", (("x#1", 1, None),))


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"query": "a",', "invalid JSON"),
        ('["not", "an", "object"]', "JSON object"),
        ({"language": "en"}, "no query text"),
        ({"query": "a", "retrieved_contexts": "one context"}, "retrieved_contexts"),
        ({"query": "a", "gold_evidence": "d1"}, "gold_evidence"),
        ({"query": "a", "ground_truths": "r"}, "ground_truths"),
        ({"query": "a", "response": ""}, "response"),
        ({"query": "a", "answer": "   "}, "answer"),
        ({"query": "a", "response": None}, "response"),
        ({"query": "a", "rel_map": {"d1": 1.5}}, "rel_map"),
        ({"query": "a", "rel_map": {"d1": "2"}}, "rel_map"),
        ({"query": "a", "rel_map": ["d1"]}, "rel_map"),
        ({"query": "a", "retrieved": ["d1", "d2", "d1"]}, "'d1'"),
        ({"query": "a", "retrieved_contexts": ["x", " x "]}, "twice"),
        ({"query": "a", "retrieved_contexts": ["x", "y"], "retrieved_ids": ["d1"]}, "retrieved_ids"),
        ({"query": "a", "retrieved_contexts": ["x"], "retrieved_scores": [1, 2]}, "retrieved_scores"),
        ({"query": "a", "retrieved_ids": ["d1"], "retrieved_scores": ["high"]}, "retrieved_scores[0]"),
        ({"query": "a", "retrieved_contexts": [{"text": "x", "rank": 1}]}, "retrieved_contexts[0]"),
        ({"query": 5}, "query"),
        ({"qid": 1.5, "query": "a"}, "qid"),
        ({"qid": True, "query": "a"}, "qid"),
        ({"query": "a", "language": ["en"]}, "language"),
        ({"query": "a", "metadata": "x"}, "metadata"),
        ({"query": "a", "gold_evidence": ["d1", "d1"]}, "gold_evidence"),
        ({"question": "a", "user_input": "b"}, "question"),
        ({"query": "a", "reference": ""}, "reference"),
        ({"query": "a", "retrieved_contexts": [""]}, "retrieved_contexts[0]"),
    ],
)
def test_malformed_jsonl_record_names_file_line_and_field(line, field):
    """Each kind of malformed record is an InputError naming the file, the line and the field."""
    lines = jsonl({"qid": "ok", "query": "fine"}, line)
    with pytest.raises(InputError) as caught:
        list(parse_records(lines, "jsonl", "bad.jsonl"))
    assert (caught.value.path, caught.value.line) == ("bad.jsonl", 2)
    assert str(caught.value).startswith("bad.jsonl:2: ") and field in str(caught.value)


@pytest.mark.parametrize(
    ("record", "spellings"),
    [
        ({"input": "q", "user_input": "q"}, ("user_input", "input")),
        ({"query": "q", "actual_output": "a", "response": "a"}, ("response", "actual_output")),
        ({"query": "q", "expected_output": "r", "reference": "r"}, ("reference", "expected_output")),
        ({"query": "q", "retrieval_context": ["c"], "contexts": ["c"]}, ("retrieval_context", "contexts")),
        ({"query": "q", "context": ["c"], "reference_contexts": ["c"]}, ("reference_contexts", "context")),
    ],
)
def test_two_spellings_of_one_field_are_an_error_naming_both(record, spellings):
    """A record that spells one field twice (even with equal values) is one error naming both spellings."""
    with pytest.raises(InputError) as caught:
        one(record)
    message = str(caught.value)
    assert message == f"t.jsonl:1: fields {spellings[0]} and {spellings[1]} are two spellings of one field: give one"


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_unknown_field_is_an_error_naming_it_and_the_accepted_names(fmt):
    """A misspelt field (retreived_contexts) is never kept aside: the error names it and lists the accepted names."""
    record = {"qid": "a", "question": "q", "retreived_contexts": "x"}
    lines = jsonl(record) if fmt == "jsonl" else [",".join(record), ",".join(record.values())]
    with pytest.raises(InputError) as caught:
        list(parse_records(lines, fmt, "u." + fmt))
    message = str(caught.value)
    assert message.startswith(f"u.{fmt}:{1 if fmt == 'jsonl' else 2}: unknown field 'retreived_contexts' (accepted: ")
    assert all(name in message for name in ("user_input", "input", "retrieved_contexts", "retrieval_context"))
    assert "metadata" in message and "\n" not in message


def test_duplicate_qid_names_the_first_line():
    """A qid used twice in one file is an error on the second line that points at the first."""
    lines = jsonl({"qid": "a", "query": "x"}, {"qid": "b", "query": "y"}, {"qid": "a", "query": "z"})
    with pytest.raises(InputError, match=r"^d.jsonl:3: qid 'a' appears twice \(first on line 1\)"):
        list(parse_records(lines, "jsonl", "d.jsonl"))


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ('r2,b,"[""x"" ""y""]",c', "contexts"),
        ("r2,b,x,c,extra", "5 cells"),
        ('r2,b,x,"  "', "answer"),
        ("r2,b,x,", "answer"),
        ('r2,b,"[""x"", ""y""]",c', None),
    ],
)
def test_malformed_csv_row_names_file_line_and_field(row, field):
    """A bad CSV row is an InputError naming file, line and field; a good one after it parses."""
    text = 'qid,question,contexts,answer\nr1,a,"[""one""]",yes\n' + row + "\n"
    records = parse_records(io.StringIO(text, newline=""), "csv", "e.csv")
    if field is None:
        assert [len(r.retrieved) for r in records] == [1, 2]
        return
    with pytest.raises(InputError) as caught:
        list(records)
    assert (caught.value.path, caught.value.line) == ("e.csv", 3) and field in str(caught.value)


def test_csv_scores_rel_map_and_metadata_cells():
    """CSV cells for retrieved_scores, rel_map and metadata are JSON; a plain score cell is one number."""
    text = 'query,retrieved_ids,retrieved_scores,rel_map,metadata\nq,d1,0.5,"{""d1"": 2}","{""k"": 1}"\n'
    (record,) = parse_records(io.StringIO(text, newline=""), "csv", "s.csv")
    assert (record.retrieved, record.judgments, record.metadata) == ((("d1", 0.5, None),), (("d1", 2, None),), {"k": 1})
    with pytest.raises(InputError, match=r"^s.csv:2: rel_map must be an object"):
        list(parse_records(io.StringIO("query,rel_map\nq,[1]\n", newline=""), "csv", "s.csv"))


def test_on_error_skips_bad_records_and_reports_each_line():
    """With on_error, bad records are reported as (line, message) and every other record is still yielded."""
    skipped: list[tuple[int, str]] = []
    lines = jsonl(
        {"qid": "a", "query": "x"},
        "{oops",
        {"qid": "b", "query": "y", "response": ""},
        {"qid": "a", "query": "again"},
        {"qid": "c", "query": "z"},
    )
    got = [r.qid for r in parse_records(lines, "jsonl", "s.jsonl", lambda n, m: skipped.append((n, m)))]
    assert got == ["a", "c"]
    assert [n for n, _ in skipped] == [2, 3, 4] and "response" in skipped[1][1]


def test_unknown_format_and_bad_csv_header_are_errors():
    """An unknown format and a CSV header with a repeated column are InputErrors."""
    with pytest.raises(InputError, match="unknown record format 'xml'"):
        list(parse_records([], "xml", "x.xml"))
    with pytest.raises(InputError, match=r"^h.csv:1: the CSV header"):
        list(parse_records(io.StringIO("query,query\na,b\n", newline=""), "csv", "h.csv"))
