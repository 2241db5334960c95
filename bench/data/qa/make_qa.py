"""Write the retrieval QA sets of bench/embedders.py from SQuAD-format files (see README.md here):

    python bench/data/qa/make_qa.py SQUAD_DEV.json CMRC2018_DEV.json

Each paragraph becomes a document (`corpus.jsonl`: id, text, lang) and each answerable question a query whose gold
document is its paragraph (`evalset.jsonl`: qid, query, lang, gold_doc_ids, ground_truths: the answers). English keeps
every paragraph of the file given; Chinese keeps a seeded sample of --zh-paragraphs paragraphs and their questions.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent


def paragraphs(path: str) -> list[dict]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    return [p for article in data for p in article["paragraphs"]]


def write(name: str, lang: str, picked: list[dict]) -> tuple[int, int]:
    folder = HERE / name
    folder.mkdir(exist_ok=True)
    docs, queries = [], []
    for i, p in enumerate(picked):
        doc_id = f"{name}-p{i:04d}"
        docs.append({"id": doc_id, "text": p["context"].strip(), "lang": lang})
        for q in p["qas"]:
            answers = list(dict.fromkeys(a["text"].strip() for a in q.get("answers", []) if a["text"].strip()))
            if q.get("is_impossible") or not answers or not q["question"].strip():
                continue
            queries.append(
                {
                    "qid": q["id"],
                    "query": q["question"].strip(),
                    "lang": lang,
                    "gold_doc_ids": [doc_id],
                    "ground_truths": answers,
                }
            )
    for file, rows in (("corpus.jsonl", docs), ("evalset.jsonl", queries)):
        (folder / file).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return len(docs), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad")
    parser.add_argument("cmrc")
    parser.add_argument("--zh-paragraphs", type=int, default=300)
    args = parser.parse_args()
    print("en-squad", write("en-squad", "en", paragraphs(args.squad)))
    zh = paragraphs(args.cmrc)
    random.Random(2018).shuffle(zh)
    print("zh-cmrc", write("zh-cmrc", "zh", zh[: args.zh_paragraphs]))


if __name__ == "__main__":
    main()
