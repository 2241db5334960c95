"""Write the labelled judge pairs (dev.jsonl, heldout.jsonl) from the bundled demo corpus and eval set.

Each pair holds one question and two versions of what a judge sees, where the better one is known by
construction: the grounded answer against the same answer with its key number, date or name swapped, negated,
answering another question, evasive or merely restating the question; the evidence passages against other
passages, against the same passages with the answer swapped (counterfactual), or ranked last. Questions are
split by a hash of their id: a third (and their own evasive / poor phrasings) are held out, so heuristics tuned
on dev.jsonl are measured on pairs they never saw. Run from the repository root:

    python tests/data/judge_pairs/make_pairs.py [OUT_DIR]

The output is deterministic (seeded); `tests/test_judge_pairs.py` checks the files are what this script writes.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[2] / "ragsql" / "data" / "demo"
SEED = 20261124

EVASIVE = {
    ("en", "dev"): [
        "It depends on many factors, so there is no single answer.",
        "That is a good question, and opinions differ on it.",
        "I'm not able to give a definite answer to that.",
        "There are several ways to look at this.",
    ],
    ("en", "heldout"): [
        "Hard to say; it varies from case to case.",
        "Nobody can really tell for sure.",
        "Well, that one has no simple answer.",
        "It is complicated and people disagree.",
    ],
    ("zh", "dev"): [
        "这个问题因人而异，很难一概而论。",
        "这取决于很多因素，没有统一的答案。",
        "这是个好问题，不同的人有不同的看法。",
        "我没法给出确切的答案。",
    ],
    ("zh", "heldout"): [
        "这个不好说，要看具体情况。",
        "说不准，情况比较复杂。",
        "这个问题没有简单的答案。",
        "很难讲，各种可能都有。",
    ],
}
POOR = {  # restating the question without answering it
    ("en", "dev"): [
        "{q} This is an important question that many people ask.",
        "Regarding {t}: it is a topic worth studying carefully.",
    ],
    ("en", "heldout"): ["People often wonder: {q}", "{t} is something that comes up a lot in practice."],
    ("zh", "dev"): ["{q}这是很多人都关心的问题。", "关于{t}，这是一个值得认真研究的话题。"],
    ("zh", "heldout"): ["大家经常会问：{q}", "{t}在实际工作中经常被讨论。"],
}
SHORT = {"en": "The answer is {x}.", "zh": "答案是{x}。"}

_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?(?![A-Za-z0-9_])")
_EN_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?")
_ZH_NAMES = {  # the demo corpus's Chinese names by kind (jieba's tags alone mix in ordinary words)
    "person": "张伟 张维 章伟 李凯 周航 韩杉 陈静 刘芳 李飞 赵敏 孙浩 吴磊 王芳 马丽 林涛 牛顿 爱因斯坦 傅科 莱布尼茨",
    "place": "上海 东海 长江 宜昌 北京 重庆 湖北 杭州 成都 伦敦 巴黎 法国 德国 英国 瑞士 南京 武汉 青海 四川 云南",
    "dept": "产品研发部 绩效管理部 教研部 人事部 行政部 财务部",
    "term": "恒星日 太阳日 黄赤交角 余弦距离 欧氏距离 负内积 昼夜交替 语义搜索 推荐系统 图像检索 词频饱和",
}


def split_of(qid: str) -> str:
    """'heldout' for a third of the questions (by a hash of the id), 'dev' for the rest."""
    return "heldout" if int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def paragraph(doc: str, span: str) -> str:
    """The paragraph of `doc` holding `span` (the span itself when it crosses paragraphs)."""
    for para in doc.split("\n\n"):
        if span in para:
            return para.strip()
    return span


def entities(text: str, lang: str) -> list[tuple[str, str]]:
    """(kind, surface) of the swappable tokens of `text`: numbers first, then names."""
    found = [("number", m.group(0)) for m in _NUMBER.finditer(text)]
    if lang == "en":
        found += [("name", m.group(0)) for m in _EN_NAME.finditer(text)]
    else:
        found += sorted(
            ((kind, name) for kind, names in _ZH_NAMES.items() for name in names.split() if name in text),
            key=lambda f: text.index(f[1]),
        )
    return found


def other_number(x: str, rng: random.Random) -> str:
    """A different number of the same shape (a year stays a plausible year)."""
    if "." in x:
        head, tail = x.split(".")
        return f"{head}.{(int(tail) + rng.randint(1, 8)) % 10 ** len(tail):0{len(tail)}d}"
    n = int(x)
    if 1000 <= n <= 2100:
        return str(n + rng.choice([-12, -7, -3, 4, 9, 16]))
    return str(n + rng.randint(1, 9) if n < 10 else n + rng.choice([-1, 1]) * max(1, n // rng.randint(3, 6)))


def swap(
    text: str,
    lang: str,
    pools: dict,
    rng: random.Random,
    prefer: str | None = None,
    avoid: str = "",
    exclude: str = "",
    last: bool = False,
) -> tuple[str, str, str] | None:
    """`text` with one key token replaced everywhere by another of its kind: (new text, token, replacement), or
    None. The token is not in `avoid` (the question), the replacement not in `exclude` (the evidence); `last`
    takes the token that comes last in the text rather than the first found."""
    found = [f for f in entities(text, lang) if f[1] not in avoid]
    if prefer is not None:
        found = [f for f in found if f[1] == prefer] or found
    if last:
        found.sort(key=lambda f: -text.rindex(f[1]))
    for kind, surface in found:
        if kind == "number":
            new = other_number(surface, rng)
        else:
            pool = _ZH_NAMES[kind].split() if lang == "zh" else pools[lang, kind]
            choices = sorted(p for p in pool if p != surface and p not in text + exclude and surface not in p)
            if not choices:
                continue
            new = rng.choice(choices)
        return replace(text, surface, new), surface, new
    return None


def replace(text: str, old: str, new: str) -> str:
    """`text` with every `old` replaced by `new` (a number only where it stands alone: 5 is not in 0.75)."""
    if _NUMBER.fullmatch(old):
        return re.sub(rf"(?<![A-Za-z0-9_.]){re.escape(old)}(?![A-Za-z0-9_]|\.\d)", new, text)
    return text.replace(old, new)


def negate(text: str, lang: str) -> str:
    """`text` with its first claim negated (a negated one made positive)."""
    if lang == "zh":
        for old, new in (("不是", "是"), ("没有", "有"), ("不", "")):
            if old in text:
                return text.replace(old, new, 1)
        for old, new in (
            (r"(?<![但于还就或总凡])是(?!否)", "不是"),
            ("可以", "不可以"),
            ("(?<!不)会", "不会"),
            ("(?<!不)能", "不能"),
            ("(?<![没具])有", "没有"),
        ):
            if re.search(old, text):
                return re.sub(old, new, text, count=1)
        return "并非如此：" + text
    if re.search(r"\bnot\b", text):
        return re.sub(r"\s*\bnot\b", "", text, count=1)
    m = re.search(r"\b(is|are|was|were|can|will|does|do|did|has|have)\b", text)
    if m:
        return text[: m.end()] + " not" + text[m.end() :]
    return "It is not true that " + text[0].lower() + text[1:]


def topic(question: str, lang: str) -> str:
    core = question.rstrip("?？。. ")
    return core.split("，")[0].split("？")[0] if lang == "zh" else core.split(",")[0]


def main(out_dir: Path = HERE) -> int:
    docs = {d["id"]: d for d in map(json.loads, (DEMO / "corpus.jsonl").read_text("utf-8").splitlines())}
    items = [json.loads(line) for line in (DEMO / "evalset.jsonl").read_text("utf-8").splitlines()]
    items = [i for i in items if i["metadata"]["answerable"]]
    pools: dict = {}
    for d in docs.values():
        for kind, surface in entities(d["text"], d["lang"]):
            pools.setdefault((d["lang"], kind), set()).add(surface)
    paragraphs = {
        lang: [
            (d["id"], p.strip())
            for d in docs.values()
            if d["lang"] == lang
            for p in d["text"].split("\n\n")
            if len(p.strip()) > 40
        ]
        for lang in ("en", "zh")
    }
    rng = random.Random(SEED)
    out: dict[str, list[dict]] = {"dev": [], "heldout": []}
    for item in items:
        lang, qid, q, ref = item["language"], item["qid"], item["query"], item["gold_answer"]
        split = split_of(qid)
        gold_ids = {e["doc_id"] for e in item["gold_evidence"]}
        gold = list(dict.fromkeys(paragraph(docs[e["doc_id"]]["text"], e["text"]) for e in item["gold_evidence"]))
        negatives = [p for doc_id, p in paragraphs[lang] if doc_id not in gold_ids]
        neg = rng.sample(negatives, len(gold) + 1)
        others = [i for i in items if i["language"] == lang and i["qid"] != qid]
        other = rng.choice(others)["gold_answer"]
        span = item["gold_evidence"][0]["text"]
        base = {"question": q, "language": lang}
        pairs: list[dict] = []

        def add(
            metric: str,
            kind: str,
            better: dict,
            worse: dict,
            *,
            pairs: list[dict] = pairs,
            qid: str = qid,
            base: dict = base,
            **shared,
        ) -> None:
            pairs.append(
                {
                    "id": f"{qid}:{metric}:{kind}",
                    "metric": metric,
                    "kind": kind,
                    **base,
                    **shared,
                    "better": better,
                    "worse": worse,
                }
            )

        def poor(q: str = q, lang: str = lang, split: str = split) -> dict:
            """An answer merely restating the question, in one of the split's poor phrasings."""
            return {"answer": rng.choice(POOR[lang, split]).format(q=q, t=topic(q, lang))}

        evidence = ref + "".join(gold)
        swapped = swap(ref, lang, pools, rng, avoid=q, exclude=evidence)
        if swapped:
            add("faithfulness", "swap", {"answer": ref}, {"answer": swapped[0]}, contexts=gold)
            add("answer_correctness", "swap", {"answer": ref}, {"answer": swapped[0]}, reference=ref)
            add("answer_similarity", "swap", {"answer": ref}, {"answer": swapped[0]}, reference=ref)
        answer_term = swap(ref, lang, pools, rng, avoid=q, last=True)
        if answer_term:
            short = SHORT[lang].format(x=answer_term[1])
            wrong = swap(short, lang, pools, rng, prefer=answer_term[1], exclude=evidence)
            if wrong:
                add("faithfulness", "short", {"answer": short}, {"answer": wrong[0]}, contexts=gold)
                add("answer_relevancy", "short-vs-poor", {"answer": short}, poor(), contexts=gold)
        add("faithfulness", "negated", {"answer": ref}, {"answer": negate(ref, lang)}, contexts=gold)
        add("faithfulness", "other-question", {"answer": ref}, {"answer": other}, contexts=gold)
        counterfactual = swap(span, lang, pools, rng, avoid=q, exclude=evidence)
        if counterfactual:
            changed = [replace(p, counterfactual[1], counterfactual[2]) for p in gold]
            add("faithfulness", "counterfactual-contexts", {"contexts": gold}, {"contexts": changed}, answer=span)
            add("context_recall", "counterfactual-contexts", {"contexts": gold}, {"contexts": changed}, reference=span)
        add("answer_relevancy", "other-question", {"answer": ref}, {"answer": other}, contexts=gold)
        add("answer_relevancy", "evasive", {"answer": ref}, {"answer": rng.choice(EVASIVE[lang, split])}, contexts=gold)
        add("answer_relevancy", "poor", {"answer": ref}, poor(), contexts=gold)
        add("context_relevance", "negatives", {"contexts": gold}, {"contexts": neg[: len(gold)]})
        add("context_relevance", "mixed", {"contexts": [gold[0], neg[0]]}, {"contexts": neg[1:3]})
        hard = max(negatives, key=lambda p: (len(set(p) & set(q)), p))  # shares the most characters
        add("context_relevance", "hard-negative", {"contexts": gold[:1]}, {"contexts": [hard]})
        add("context_recall", "negatives", {"contexts": gold}, {"contexts": neg[: len(gold)]}, reference=ref)
        if len(gold) > 1:
            add("context_recall", "partial", {"contexts": gold}, {"contexts": [gold[0], neg[0]]}, reference=ref)
        add(
            "context_precision",
            "ranked-last",
            {"contexts": [gold[0], *neg]},
            {"contexts": [*neg, gold[0]]},
            reference=ref,
        )
        add("context_precision", "negatives", {"contexts": [gold[0], neg[0]]}, {"contexts": neg[:2]}, reference=ref)
        add("answer_correctness", "other-question", {"answer": ref}, {"answer": other}, reference=ref)
        add("answer_correctness", "negated", {"answer": ref}, {"answer": negate(ref, lang)}, reference=ref)
        add("answer_similarity", "other-question", {"answer": ref}, {"answer": other}, reference=ref)
        out[split].extend(pairs)
    for split, pairs in out.items():
        text = "".join(json.dumps(p, ensure_ascii=False, sort_keys=True) + "\n" for p in pairs)
        (Path(out_dir) / f"{split}.jsonl").write_text(text, "utf-8")
        print(f"{split}.jsonl: {len(pairs)} pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
