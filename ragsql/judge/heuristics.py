"""Deterministic stand-ins for the judge's ten tasks and for answer generation: a JSON-ready reply built from a
request's raw inputs by lexical overlap (`ragsql.judge.lexical`), for the offline judge.

Overlap is the share of one text's content tokens found in another. The thresholds below are the whole model:

* statements: sentences, cut at Chinese clause marks (，；) and ``;``; a clause of fewer than 3 content tokens
  stays with its neighbour, a fragment with none is dropped.
* verify: a statement's best overlap with any one context: ≥ 0.6 supported, ≥ 0.35 partial, else unsupported;
  supported-level overlap with a negation (不/没/非/无/未/否, not/no/never/n't) on one side only of the statement
  and its closest context sentence is contradicted.
* usefulness: a context is useful when it covers ≥ 0.6 of some statement of the reference (else the answer).
* sentence_relevance: a context sentence is relevant when it covers ≥ 0.5 of the question's content tokens.
* classify: an answer statement is TP when one reference statement covers ≥ 0.5 of it, else FP; a reference
  statement is TP when one answer statement covers ≥ 0.5 of it, else FN.
* rating: 1 + round(4 × similarity) clipped to 1..5 (similarity is computed by the caller).
* questions / answer_analysis: the answer's statements turned into questions in the question's language (an
  LLM would paraphrase; this cannot); non-committal when the answer holds a phrase such as 我不知道 / I don't know.
* critique: harmfulness and maliciousness only on obvious keywords; coherence when there is a sentence;
  correctness when ≥ half of the answer's statements are supported by the contexts (no contexts: no);
  conciseness when no sentence repeats another and ≥ half of the content tokens are distinct. A user-defined
  aspect cannot be assessed: its verdict is *no*, and its reason says so.
* citations: supported when the cited texts cover ≥ 0.6 of the sentence.
* generate (extractive, ``GENERATOR``): every sentence of the contexts scored by the share of the question's
  content tokens it holds; the best ones (up to 3) scoring ≥ 0.25 and more than half the best score, in context
  order, each cited ``[id]`` before its end punctuation; none: "I don't know based on the retrieved context." /
  "根据检索到的内容无法回答。" (by the question's language).

Every reason starts with ``offline:``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ragsql.judge.language import detect_language, split_sentences
from ragsql.judge.lexical import content_tokens, coverage, has_negation, similarity
from ragsql.judge.prompts import JudgeRequest
from ragsql.judge.verdicts import CITATION

__all__ = ["ANSWERS", "COVERED", "DONT_KNOW", "GENERATOR", "PARTIAL", "RELEVANT", "SUPPORTED", "TASKS", "rating",
           "statements_of"]

SUPPORTED, PARTIAL, COVERED, RELEVANT, ANSWERS = 0.6, 0.35, 0.5, 0.5, 0.25
GENERATOR = "offline-extractive-v1"
"""The name of the offline answer generator, recorded in the metadata of the answers it writes."""
DONT_KNOW = {"en": "I don't know based on the retrieved context.", "zh": "根据检索到的内容无法回答。"}
_MAX_ANSWER_SENTENCES = 3
_SENTENCE_END = re.compile(r"[。！？.!?]+[\u201d\u2019\"\u300d\u300f\uff09)]*$")

_CJK = "\u3400-\u9fff"
_CLAUSE = re.compile(rf"[，；;]|(?<=[{_CJK}]),|,(?=[{_CJK}])")
_END = "。！？.!?；;，, "
_NONCOMMITTAL = ("不知道", "不清楚", "不确定", "无法回答", "无法确定", "没有提到", "未提及", "没有相关信息",
                 "i don't know", "i do not know", "not sure", "cannot answer", "can't answer", "unable to answer",
                 "no information", "not mentioned", "i'm not certain")
_AUX = {"is", "are", "was", "were", "can", "will", "should", "could"}
_PRONOUNS = {"it", "they", "he", "she", "we", "you", "this", "that", "these", "those", "there"}
_ZH_FORMS = ("{}吗？", "是否{}？", "为什么{}？")
_EN_FORMS = ("", "Is it true that {}?", "Why {}?")  # "" = move the auxiliary verb to the front
_KEYWORDS = {
    "harmfulness": (r"\b(kill|murder|bomb|explosive|weapon|poison|suicide|self-harm|overdose)",
                    "杀人|炸弹|爆炸物|武器|毒药|自杀|自残"),
    "maliciousness": (r"\b(hack into|steal|phishing|malware|ransomware|fraud|scam|launder)",
                      "黑进|入侵|盗取|窃取|钓鱼|恶意软件|诈骗|勒索|洗钱"),
}


def _pieces(sentence: str) -> list[str]:
    out: list[str] = []
    for clause in (c.strip() for c in _CLAUSE.split(sentence)):
        if out and len(content_tokens(clause)) < 3:
            out[-1] = f"{out[-1]}，{clause}" if clause else out[-1]
        elif out and len(content_tokens(out[-1])) < 3:
            out[-1] = f"{out[-1]}，{clause}"
        elif clause:
            out.append(clause)
    return out


def statements_of(text: str) -> list[str]:
    """The offline statements of a text: its sentences and Chinese clauses that carry content."""
    return [p for s in split_sentences(text) for p in _pieces(s) if content_tokens(p)]


def _statements(request: JudgeRequest[Any]) -> dict[str, Any]:
    return {"statements": statements_of(request.inputs["text"])}


def _best(text: str, pools: Sequence[set[str]]) -> tuple[float, int]:
    """Highest overlap of `text` with one of `pools` and that pool's 1-based index (0 when there is none)."""
    best, where = 0.0, 0
    for i, pool in enumerate(pools, 1):
        score = coverage(text, pool)
        if score > best:
            best, where = score, i
    return best, where


def _verify(request: JudgeRequest[Any]) -> dict[str, Any]:
    contexts = request.inputs["contexts"]
    pools = [set(content_tokens(c)) for c in contexts]
    verdicts = []
    for i, statement in enumerate(request.inputs["statements"], 1):
        score, where = _best(statement, pools)
        verdict = "supported" if score >= SUPPORTED else "partial" if score >= PARTIAL else "unsupported"
        if verdict == "supported":
            closest = max(split_sentences(contexts[where - 1]), key=lambda s: coverage(statement, s))
            if has_negation(statement) != has_negation(closest):
                verdict = "contradicted"
        reason = f"offline: overlap {score:.2f} with context {where}" if where else "offline: no overlap"
        verdicts.append({"id": i, "verdict": verdict, "reason": reason + (" (negation differs)"
                                                                           if verdict == "contradicted" else "")})
    return {"verdicts": verdicts}


def _usefulness(request: JudgeRequest[Any]) -> dict[str, Any]:
    reference = request.inputs.get("reference")
    what, target = ("reference", reference) if reference is not None else ("answer", request.inputs["answer"] or "")
    targets = statements_of(target) or [target]
    verdicts = []
    for i, context in enumerate(request.inputs["contexts"], 1):
        pool = set(content_tokens(context))
        score = max(coverage(t, pool) for t in targets)
        verdicts.append({"id": i, "useful": score >= SUPPORTED,
                         "reason": f"offline: covers {score:.2f} of a {what} statement"})
    return {"verdicts": verdicts}


def _sentence_relevance(request: JudgeRequest[Any]) -> dict[str, Any]:
    question = request.inputs["question"]
    items = request.items or tuple((ci, s) for ci, c in enumerate(request.inputs["contexts"], 1)
                                   for s in split_sentences(c))
    return {"relevant": [i for i, (_, sentence) in enumerate(items, 1) if coverage(question, sentence) >= RELEVANT]}


def _classify(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, reference = request.inputs["answer_statements"], request.inputs["reference_statements"]
    a_pools, r_pools = [set(content_tokens(s)) for s in answer], [set(content_tokens(s)) for s in reference]
    return {"answer": [{"id": i, "label": "TP" if _best(s, r_pools)[0] >= COVERED else "FP"}
                       for i, s in enumerate(answer, 1)],
            "reference": [{"id": i, "label": "TP" if _best(s, a_pools)[0] >= COVERED else "FN"}
                          for i, s in enumerate(reference, 1)]}


def rating(score: float) -> dict[str, Any]:
    """The 1-5 rating for a question-answer similarity in [0, 1]."""
    return {"score": min(5, max(1, 1 + round(4 * score))), "reason": f"offline: similarity {score:.2f}"}


def _as_question(statement: str, form: str, lang: str) -> str:
    core = statement.rstrip(_END)
    if lang == "zh":
        return form.format(core)
    words = core.split()
    if words and words[0].lower() in _PRONOUNS:
        words[0] = words[0].lower()
    aux = next((i for i, w in enumerate(words[:6]) if i and w.lower() in _AUX), None)
    if not form and aux is not None:
        return f"{words[aux].capitalize()} {' '.join(words[:aux] + words[aux + 1:])}?"
    return (form or "Is it true that {}?").format(" ".join(words))


def _questions(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, question, n = request.inputs["answer"], request.inputs["question"], request.inputs["n"]
    lowered = answer.lower()
    noncommittal = not answer.strip() or any(p in lowered for p in _NONCOMMITTAL)
    stated = statements_of(answer)
    found = stated or ([answer.strip()] if answer.strip() else [])
    lang = detect_language(question, request.language)
    forms = _ZH_FORMS if lang == "zh" else _EN_FORMS
    questions = [_as_question(found[i % len(found)], forms[(i // len(found)) % len(forms)], lang)
                 for i in range(n)] if found else []
    reply: dict[str, Any] = {"questions": questions, "noncommittal": noncommittal}
    if request.kind == "answer_analysis":
        reply["statements"] = stated
    return reply


def _critique(request: JudgeRequest[Any]) -> dict[str, Any]:
    answer, contexts = request.inputs["answer"], request.inputs.get("contexts") or []
    names = list(request.context.get("aspects") or [n for n, _ in request.inputs["aspects"]])
    return {"verdicts": [{"aspect": name, **_aspect(name, answer, contexts)} for name in names]}


def _aspect(name: str, answer: str, contexts: Sequence[str]) -> dict[str, Any]:
    sentences = [s for s in split_sentences(answer) if content_tokens(s)]
    if name in _KEYWORDS:
        en, zh = _KEYWORDS[name]
        hit = re.search(en, answer.lower()) or re.search(zh, answer)
        return {"verdict": bool(hit), "reason": f"offline: keyword {hit.group(0)!r}" if hit
                else f"offline: no {name} keyword"}
    if name == "coherence":
        return {"verdict": bool(sentences), "reason": f"offline: {len(sentences)} sentence(s) with content"}
    if name == "correctness":
        if not contexts:
            return {"verdict": False, "reason": "offline: no contexts to check the answer against"}
        pools = [set(content_tokens(c)) for c in contexts]
        found = statements_of(answer)
        share = sum(_best(s, pools)[0] >= SUPPORTED for s in found) / len(found) if found else 0.0
        return {"verdict": share >= 0.5, "reason": f"offline: {share:.2f} of statements supported by contexts"}
    if name == "conciseness":
        tokens = content_tokens(answer)
        distinct = len(set(tokens)) / len(tokens) if tokens else 0.0
        repeated = any(similarity(a, b) >= 0.9 for i, a in enumerate(sentences) for b in sentences[i + 1:])
        return {"verdict": distinct >= 0.5 and not repeated,
                "reason": f"offline: {distinct:.2f} distinct tokens" + (", a sentence repeats" if repeated else "")}
    return {"verdict": False, "reason": f"offline: cannot assess user-defined aspect {name!r}; answered no"}


def _citations(request: JudgeRequest[Any]) -> dict[str, Any]:
    verdicts = []
    for i, (sentence, cited) in enumerate(request.inputs["claims"], 1):
        score = coverage(sentence, {t for c in cited for t in content_tokens(c)})
        verdicts.append({"id": i, "supported": score >= SUPPORTED,
                         "reason": f"offline: cited text covers {score:.2f}"})
    return {"verdicts": verdicts}


def _generate(request: JudgeRequest[Any]) -> dict[str, Any]:
    question = request.inputs["question"]
    found = []  # (score, tie-break, order, sentence, id)
    for cid, text in request.inputs["contexts"]:
        for sentence in split_sentences(CITATION.sub(" ", text)):  # a bracketed "[1]" in a context is no citation
            score = coverage(question, sentence)
            if score >= ANSWERS:
                found.append((score, similarity(question, sentence), len(found), sentence, cid))
    ranked = sorted(found, key=lambda f: (-f[0], -f[1], f[2]))[:_MAX_ANSWER_SENTENCES]
    chosen = sorted((f for f in ranked if f[0] > ranked[0][0] / 2), key=lambda f: f[2])
    if not chosen:
        return {"answer": DONT_KNOW[request.language], "citations": []}
    parts = [_cite(sentence, cid) for *_, sentence, cid in chosen]
    joined = "".join(p if i == 0 or detect_language(p) == "zh" else " " + p for i, p in enumerate(parts))
    return {"answer": joined, "citations": list(dict.fromkeys(cid for *_, cid in chosen))}


def _cite(sentence: str, cid: str) -> str:
    """`sentence` with ``[cid]`` before its end punctuation (added when missing), so the citation stays in it."""
    zh = detect_language(sentence) == "zh"
    end = _SENTENCE_END.search(sentence)
    core, punct = (sentence[:end.start()], end.group(0)) if end else (sentence, "。" if zh else ".")
    return f"{core.rstrip()}{'' if zh else ' '}[{cid}]{punct}"


TASKS: dict[str, Callable[[JudgeRequest[Any]], dict[str, Any]]] = {
    "statements": _statements, "answer_analysis": _questions, "questions": _questions, "verify": _verify,
    "classify": _classify, "usefulness": _usefulness, "sentence_relevance": _sentence_relevance,
    "critique": _critique, "citations": _citations, "generate": _generate,
}
"""The reply builder of each task but rating, whose similarity the caller computes (it may use an embedder)."""
