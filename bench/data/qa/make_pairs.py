"""Write judge pairs from the public QA sets (SQuAD 2.0 dev, CMRC 2018 dev; see README.md here) into pairs.jsonl:
a blind test of the offline judge, whose heuristics were built on the demo corpus's pairs and never read these.

    python bench/data/qa/make_pairs.py [--per-language 60]

For a seeded sample of questions per language, with the paragraph it was asked on and the sentence of that
paragraph holding its answer (the grounded answer, a sentence a person wrote), the better side is known by
construction:
- faithfulness / swap: that sentence vs the same with its answer replaced by another question's answer of the
  same language (a number by a number when the answer is one); the context is the paragraph.
- faithfulness / counterfactual-contexts: the sentence judged against its paragraph vs the paragraph with the
  answer replaced everywhere.
- answer_relevancy / other-question: the sentence vs the answer sentence of another question.
- context_relevance / negatives and hard-negative: the paragraph vs a paragraph of another question (random, or the
  one sharing the most words with the question).
- context_recall / hard-negative: reference = the answer sentence; the paragraph vs the hard negative.
- context_precision / ranked-last: reference = the answer sentence; [paragraph, hard negative] vs the reverse.

It also writes hard_pairs.jsonl, the two metrics' hard cases (issue 28), for another seeded sample of questions:
- answer_relevancy / same-article-span, -templated, -sentence: the question's answer vs the answer of another
  question asked on the same article (SQuAD's five articles; a CMRC 2018 article is one paragraph, so its paragraph),
  as the bare span, as "The answer is X." / "答案是X。", and as the paragraph's sentence holding it; the contexts
  (shared) are the paragraphs of both answers, as a RAG system answering from retrieved passages had them.
- context_relevance / same-article: the paragraph vs another paragraph of the same SQuAD article (English only).
- context_relevance / retrieved: the paragraph vs the top paragraph BM25 (k1 1.2, b 0.75, over the language's
  paragraphs, the judge's content tokens) returns for the question that is not the gold one and lacks the answer.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from ragsql.judge.language import split_sentences  # noqa: E402
from ragsql.judge.lexical import content_tokens  # noqa: E402

SETS = {"en": "en-squad", "zh": "zh-cmrc"}
SEED = 20261125
HARD_SEED = 20261127
# where each SQuAD article starts among en-squad's paragraphs (Normans, Computational complexity theory, Southern
# California, Sky (United Kingdom), Victoria (Australia)): make_qa.py keeps the file's order but not the titles
ARTICLES = (0, 39, 87, 126, 148)
_NUMBER = re.compile(r"^\d[\d,.]*$")


def load(lang: str) -> tuple[list[dict], dict[str, str]]:
    folder = HERE / SETS[lang]
    docs = {d["id"]: d["text"] for d in map(json.loads, (folder / "corpus.jsonl").read_text("utf-8").splitlines())}
    rows = []
    for q in map(json.loads, (folder / "evalset.jsonl").read_text("utf-8").splitlines()):
        paragraph = docs[q["gold_doc_ids"][0]]
        answer = max(q["ground_truths"], key=len)
        sentence = next((s.strip() for s in split_sentences(paragraph) if answer in s), None)
        if sentence and len(answer) >= 2 and sentence != answer:
            rows.append(
                {**q, "paragraph": paragraph, "answer": answer, "sentence": sentence, "doc": q["gold_doc_ids"][0]}
            )
    return rows, docs


def replacement(row: dict, pool: list[dict], rng: random.Random) -> str:
    """Another question's answer, not found in this paragraph: a number for a number."""
    number = bool(_NUMBER.match(row["answer"]))
    candidates = [
        r["answer"]
        for r in pool
        if bool(_NUMBER.match(r["answer"])) == number
        and r["answer"] not in row["paragraph"]
        and row["answer"] not in r["answer"]
    ]
    return rng.choice(candidates)


def hard_negative(row: dict, docs: dict[str, str]) -> str:
    asked = set(content_tokens(row["query"]))
    return max(
        (text for doc, text in docs.items() if doc != row["doc"] and row["answer"] not in text),
        key=lambda text: (len(asked & set(content_tokens(text))), text),
    )


def pairs(lang: str, n: int, rng: random.Random) -> list[dict]:
    rows, docs = load(lang)
    picked = rng.sample(rows, n)
    out = []
    for row in picked:
        base = {"question": row["query"], "language": lang}
        other = rng.choice([r for r in rows if r["doc"] != row["doc"]])
        swapped = replacement(row, rows, rng)
        hard = hard_negative(row, docs)
        random_doc = rng.choice([t for d, t in docs.items() if d != row["doc"] and row["answer"] not in t])

        def pair(
            metric: str, kind: str, better: dict, worse: dict, *, row: dict = row, base: dict = base, **shared
        ) -> None:
            out.append(
                {
                    "id": f"{lang}-{row['qid']}:{metric}:{kind}",
                    "metric": metric,
                    "kind": kind,
                    **base,
                    **shared,
                    "better": better,
                    "worse": worse,
                }
            )

        paragraph = [row["paragraph"]]
        pair(
            "faithfulness",
            "swap",
            {"answer": row["sentence"]},
            {"answer": row["sentence"].replace(row["answer"], swapped)},
            contexts=paragraph,
        )
        pair(
            "faithfulness",
            "counterfactual-contexts",
            {"contexts": paragraph},
            {"contexts": [row["paragraph"].replace(row["answer"], swapped)]},
            answer=row["sentence"],
        )
        pair("answer_relevancy", "other-question", {"answer": row["sentence"]}, {"answer": other["sentence"]})
        pair("context_relevance", "negatives", {"contexts": paragraph}, {"contexts": [random_doc]})
        pair("context_relevance", "hard-negative", {"contexts": paragraph}, {"contexts": [hard]})
        pair(
            "context_recall", "hard-negative", {"contexts": paragraph}, {"contexts": [hard]}, reference=row["sentence"]
        )
        pair(
            "context_precision",
            "ranked-last",
            {"contexts": [row["paragraph"], hard]},
            {"contexts": [hard, row["paragraph"]]},
            reference=row["sentence"],
        )
    return out


def article(lang: str, doc: str) -> int:
    """The article a paragraph comes from: its index among SQuAD's five, or the paragraph itself for CMRC."""
    number = int(doc.rsplit("-p", 1)[1])
    return sum(number >= start for start in ARTICLES) if lang == "en" else number


def bm25(docs: dict[str, str]):
    """A BM25 scorer (k1 1.2, b 0.75) over `docs`: query text -> [(score, doc id)], best first."""
    bags = {doc: content_tokens(text) for doc, text in docs.items()}
    mean = sum(map(len, bags.values())) / len(bags)
    df: dict[str, int] = {}
    for bag in bags.values():
        for t in set(bag):
            df[t] = df.get(t, 0) + 1
    counts = {doc: {t: bag.count(t) for t in set(bag)} for doc, bag in bags.items()}

    def rank(query: str) -> list[tuple[float, str]]:
        terms = set(content_tokens(query))
        scored = []
        for doc, tf in counts.items():
            norm = 1.2 * (0.25 + 0.75 * len(bags[doc]) / mean)
            score = sum(
                math.log(1 + (len(bags) - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * 2.2 / (tf[t] + norm)
                for t in terms
                if t in tf
            )
            scored.append((score, doc))
        return sorted(scored, key=lambda x: (-x[0], x[1]))

    return rank


def hard_pairs(lang: str, n: int, rng: random.Random) -> list[dict]:
    """The hard answer-relevancy and context-relevance pairs of `n` seeded questions of `lang` (module doc)."""
    rows, docs = load(lang)
    rank = bm25(docs)
    template = "答案是{}。" if lang == "zh" else "The answer is {}."
    out = []

    def distinct(row: dict, other: dict) -> bool:
        a, b = row["answer"].lower(), other["answer"].lower()
        return a not in b and b not in a and other["sentence"] != row["sentence"] and other["query"] != row["query"]

    usable = [
        r for r in rows if any(distinct(r, o) and article(lang, o["doc"]) == article(lang, r["doc"]) for o in rows)
    ]
    for row in rng.sample(usable, n):
        here = article(lang, row["doc"])
        other = rng.choice([o for o in rows if article(lang, o["doc"]) == here and distinct(row, o)])
        # what a RAG system answering from retrieved passages had: the paragraphs of both answers
        retrieved = {"contexts": [docs[d] for d in sorted({row["doc"], other["doc"]})]}

        def pair(metric: str, kind: str, better: dict, worse: dict, *, row: dict = row, **shared) -> None:
            out.append(
                {"id": f"{lang}-{row['qid']}:{metric}:{kind}", "metric": metric, "kind": kind,
                 "question": row["query"], "language": lang, **shared, "better": better, "worse": worse}
            )  # fmt: skip

        pair(
            "answer_relevancy", "same-article-span", {"answer": row["answer"]}, {"answer": other["answer"]}, **retrieved
        )
        pair(
            "answer_relevancy",
            "same-article-templated",
            {"answer": template.format(row["answer"])},
            {"answer": template.format(other["answer"])},
            **retrieved,
        )
        pair(
            "answer_relevancy",
            "same-article-sentence",
            {"answer": row["sentence"]},
            {"answer": other["sentence"]},
            **retrieved,
        )
        if lang == "en":
            same = sorted(
                d
                for d in docs
                if d != row["doc"] and article(lang, d) == here and row["answer"].lower() not in docs[d].lower()
            )
            pair(
                "context_relevance",
                "same-article",
                {"contexts": [row["paragraph"]]},
                {"contexts": [docs[rng.choice(same)]]},
            )
        retrieved = next(
            d for _, d in rank(row["query"]) if d != row["doc"] and row["answer"].lower() not in docs[d].lower()
        )
        pair("context_relevance", "retrieved", {"contexts": [row["paragraph"]]}, {"contexts": [docs[retrieved]]})
    return out


def write(name: str, rows: list[dict]) -> None:
    (HERE / name).write_text(
        "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8"
    )
    print(f"{name}: {len(rows)} pairs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=60)
    parser.add_argument("--hard-per-language", type=int, default=80)
    args = parser.parse_args()
    rng = random.Random(SEED)
    write("pairs.jsonl", [p for lang in SETS for p in pairs(lang, args.per_language, rng)])
    hard = random.Random(HARD_SEED)
    write("hard_pairs.jsonl", [p for lang in SETS for p in hard_pairs(lang, args.hard_per_language, hard)])


if __name__ == "__main__":
    main()
