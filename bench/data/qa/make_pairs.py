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
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=60)
    args = parser.parse_args()
    rng = random.Random(SEED)
    rows = [p for lang in SETS for p in pairs(lang, args.per_language, rng)]
    (HERE / "pairs.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8"
    )
    print(f"{len(rows)} pairs")


if __name__ == "__main__":
    main()
