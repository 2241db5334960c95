"""Answer text metrics in SQL (exact_match, token_f1, rouge_l, bleu, chrf, string_presence, levenshtein_similarity)
against independent computations: the SQuAD v2 and CMRC 2018 evaluation formulas written here in Python,
rouge-score, sacrebleu and rapidfuzz; and end to end: values right after an import, the best of several references
(BLEU: all of them at once), null with a reason."""

from __future__ import annotations

import random
import re
import string
import uuid
from collections import Counter

import psycopg
import pytest
import sacrebleu
from rapidfuzz.distance import Levenshtein
from rouge_score import rouge_scorer

from ragsql.db import install, load
from tests.conftest import _with_dbname, drop_database

METRICS = ["exact_match", "token_f1", "rouge_l", "bleu", "chrf", "string_presence", "levenshtein_similarity"]

# --- the official formulas, written independently of the SQL -------------------------------------------------


def squad_normalize(text: str) -> list[str]:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return re.sub(r"\b(a|an|the)\b", " ", text).split()


def squad_f1(pred: str, gold: str) -> float:
    p, g = squad_normalize(pred), squad_normalize(gold)
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


CMRC_PUNCT = ['-', ':', '_', '*', '^', '/', '\\', '~', '`', '+', '=', '，', '。', '：', '？', '！', '“', '”', '；', '’',
              '《', '》', '……', '·', '、', '「', '」', '（', '）', '－', '～', '『', '』']


def cmrc_segments(text: str) -> list[str]:
    """mixed_segmentation(rm_punc=True), with the stand-in for nltk.word_tokenize the SQL documents."""
    def words(run: str) -> list[str]:
        return re.findall(r"[0-9]+(?:[.,][0-9]+)+|[a-z0-9_\u00c0-\u024f]+(?:'[a-z0-9\u00c0-\u024f]+)?"
                          r"|[^a-z0-9_\u00c0-\u024f\s]", run)
    out, pending = [], ""
    for ch in text.lower().strip():
        if ch in CMRC_PUNCT:
            continue
        if re.search(r"[\u4e00-\u9fa5]", ch):
            out += words(pending) + [ch]
            pending = ""
        else:
            pending += ch
    return out + words(pending)


def cmrc_f1(pred: str, gold: str) -> float:
    p, g = cmrc_segments(pred), cmrc_segments(gold)
    best = 0
    for i in range(len(g)):  # longest common run, by brute force
        for j in range(len(p)):
            n = 0
            while i + n < len(g) and j + n < len(p) and g[i + n] == p[j + n]:
                n += 1
            best = max(best, n)
    if best == 0:
        return 0.0
    precision, recall = best / len(p), best / len(g)
    return 2 * precision * recall / (precision + recall)


def cmrc_em(pred: str, gold: str) -> float:
    strip = lambda s: "".join(ch for ch in s.lower().strip() if ch not in CMRC_PUNCT)  # noqa: E731
    return float(strip(pred) == strip(gold))


class _CharTokenizer:
    """rouge-score's tokenizer with each CJK character a token (what the SQL does for Chinese)."""

    def tokenize(self, text: str) -> list[str]:
        return re.findall(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+", text.lower())


ROUGE_EN = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
ROUGE_ZH = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_CharTokenizer())

# --- generated answers ----------------------------------------------------------------------------------------

EN_WORDS = ("the a an cat Cat sat on mat dog 1905 10.4 Einstein's relativity BM25 k1=1.2 (b) e.g. well-known "
            "U.S. don't, yes; no! what? 23 hours").split()
ZH_PIECES = ["长江", "东海", "上海", "注入", "最终", "爱因斯坦", "1905", "年", "，", "。", "《相对论》", "BM25",
             "k1", "约", "27.3", "天", "“潮汐锁定”", "的", " ", "E=mc²", "…", "A"]


def en_text(rng: random.Random) -> str:
    return " ".join(rng.choice(EN_WORDS) for _ in range(rng.randint(1, 12)))


def zh_text(rng: random.Random) -> str:
    return "".join(rng.choice(ZH_PIECES) for _ in range(rng.randint(1, 10)))


def scores(db, triples: list[tuple[str, str, str]]) -> list[dict[str, float]]:
    rows = db.execute(
        "select t.i, m, ragsql.text_score(m, t.answer, array[t.reference], t.lang) "
        "from unnest(%s::text[], %s::text[], %s::text[]) with ordinality as t(answer, reference, lang, i) "
        "cross join unnest(%s::text[]) as m",
        ([a for a, _, _ in triples], [r for _, r, _ in triples], [lang for *_, lang in triples], METRICS)).fetchall()
    out: list[dict[str, float]] = [{} for _ in triples]
    for i, metric, value in rows:
        out[i - 1][metric] = value
    return out


def test_english_equals_squad_rouge_score_and_rapidfuzz(db):
    rng = random.Random(1)
    pairs = [(en_text(rng), en_text(rng)) for _ in range(300)]
    pairs += [(r, r) for _, r in pairs[:20]] + [("The cat.", "cat"), ("a an the", "the"), ("!!!", "?")]
    got = scores(db, [(a, r, "en") for a, r in pairs])
    wrong = []
    for (answer, reference), value in zip(pairs, got):
        want = {"exact_match": float(squad_normalize(answer) == squad_normalize(reference)),
                "token_f1": squad_f1(answer, reference),
                "rouge_l": ROUGE_EN.score(reference, answer)["rougeL"].fmeasure,
                "bleu": sacrebleu.sentence_bleu(answer, [reference]).score / 100,
                "chrf": sacrebleu.sentence_chrf(answer, [reference]).score / 100,
                "string_presence": float(reference in answer),
                "levenshtein_similarity": 1 - Levenshtein.normalized_distance(reference, answer)}
        wrong += [(answer, reference, m, w, value[m]) for m, w in want.items() if abs(w - value[m]) > 1e-9]
    assert not wrong, wrong[:5]
    assert got[-3]["exact_match"] == 1.0 and got[-1]["token_f1"] == 1.0  # punctuation-only: both normalise to ''


def test_chinese_equals_cmrc_2018_and_rouge_by_character(db):
    rng = random.Random(2)
    pairs = [(zh_text(rng), zh_text(rng)) for _ in range(300)]
    pairs += [("长江在上海注入东海。", "长江最终注入东海"), ("“潮汐锁定”", "潮汐锁定"), ("约27.3天", "27.3天…")]
    got = scores(db, [(a, r, "zh") for a, r in pairs])
    wrong = []
    for (answer, reference), value in zip(pairs, got):
        want = {"exact_match": cmrc_em(answer, reference), "token_f1": cmrc_f1(answer, reference),
                "rouge_l": ROUGE_ZH.score(reference, answer)["rougeL"].fmeasure,
                "bleu": sacrebleu.sentence_bleu(answer, [reference], tokenize="zh").score / 100,
                "chrf": sacrebleu.sentence_chrf(answer, [reference]).score / 100,
                "levenshtein_similarity": 1 - Levenshtein.normalized_distance(reference, answer)}
        wrong += [(answer, reference, m, w, value[m]) for m, w in want.items() if abs(w - value[m]) > 1e-9]
    assert not wrong, wrong[:5]
    assert got[-3]["token_f1"] == pytest.approx(2 * 4 / (9 + 8))  # 注入东海: 4 of 9 and 8 segments
    assert got[-2]["exact_match"] == 1.0 and got[-1]["exact_match"] == 0.0  # “” are CMRC punctuation, … is not


@pytest.mark.parametrize("lang, tokenize", [("en", "13a"), ("zh", "zh")])
def test_bleu_reads_every_reference_at_once_as_sacrebleu_does(db, lang, tokenize):
    """Multi-reference BLEU is not the best single-reference BLEU: n-grams are clipped by the reference that has
    them most often and the brevity penalty takes the closest reference length; chrF is the best reference's."""
    rng = random.Random(3)
    text = en_text if lang == "en" else zh_text
    cases = [(text(rng), [text(rng) for _ in range(rng.randint(2, 4))]) for _ in range(150)]
    cases.append(("the cat sat on the mat", ["the cat", "sat on the mat today"]))
    rows = db.execute("select c.i, ragsql.text_score('bleu', c.answer, r.refs, %s), "
                      "ragsql.text_score('chrf', c.answer, r.refs, %s) "
                      "from unnest(%s::text[], %s::text[]) with ordinality as c(answer, joined, i) "
                      "cross join lateral (select string_to_array(c.joined, chr(1)) as refs) as r(refs)",
                      (lang, lang, [a for a, _ in cases], [chr(1).join(r) for _, r in cases])).fetchall()
    wrong = []
    for (answer, refs), (_, bleu, chrf) in zip(cases, sorted(rows)):
        want_bleu = sacrebleu.sentence_bleu(answer, refs, tokenize=tokenize).score / 100
        want_chrf = sacrebleu.sentence_chrf(answer, refs).score / 100
        if abs(want_bleu - bleu) > 1e-9 or abs(want_chrf - chrf) > 1e-9:
            wrong.append((answer, refs, want_bleu, bleu, want_chrf, chrf))
    assert not wrong, wrong[:3]
    answer, refs = cases[-1]
    best_single = max(sacrebleu.sentence_bleu(answer, [r]).score for r in refs) / 100
    assert rows and abs(sorted(rows)[-1][1] - best_single) > 0.01  # all at once differs from the best of each


@pytest.fixture
def answered(db):
    """A dataset of five queries and a run answering them: q1 two references, q2 none, q3 an empty answer, q4 no
    answer row, q5 Chinese."""
    dataset = load.ensure_dataset(db, "text")
    load.add_queries(db, dataset, [("q1", "Who proposed relativity?", "en", None), ("q2", "Why?", "en", None),
                                   ("q3", "When?", "en", None), ("q4", "Where?", "en", None),
                                   ("q5", "长江在哪里入海？", None, None)])
    load.add_reference_answers(db, dataset, [("q1", "Albert Einstein"), ("q1", "Einstein"), ("q3", "1905"),
                                             ("q4", "Bern"), ("q5", "东海")])
    run = load.create_run(db, "answers", dataset)
    load.add_answers(db, run, [("q1", "Einstein.", None), ("q2", "Because.", None), ("q3", "  ", None),
                               ("q5", "长江在上海注入东海。", None)], [])
    return db


def test_text_metrics_come_with_the_import_best_over_references_and_null_with_a_reason(answered):
    rows = answered.execute("select qid, metric, value, reason, judge_model from ragsql.evaluate_generation("
                            "'answers', %s)", (METRICS,)).fetchall()
    got = {(q, m): (v, why, judge) for q, m, v, why, judge in rows}
    assert got["q1", "exact_match"] == (1.0, None, None)  # "Einstein." = the second reference
    assert got["q1", "token_f1"][0] == 1.0 and got["q1", "string_presence"][0] == 1.0
    assert got["q2", "token_f1"] == (None, "no reference answer", None)
    assert got["q3", "rouge_l"] == (None, "empty answer", None)
    assert got["q4", "levenshtein_similarity"] == (None, "no answer", None)
    assert got["q5", "token_f1"][0] == pytest.approx(2 * 2 / (9 + 2))  # no language stored: Chinese by its text
    assert got["q5", "string_presence"][0] == 1.0
    summary = {r[0]: r[1:] for r in answered.execute(
        "select metric, value, queries, covered, missing from ragsql.summarize_generation('answers')")}
    assert summary["exact_match"] == (0.5, 5, 2, 3)  # shown by default, with no judge step: q1 1, q5 0
    assert "faithfulness" not in summary  # judge metrics appear once judged


def test_an_unknown_text_metric_is_one_clear_error(db):
    with pytest.raises(psycopg.errors.InvalidParameterValue, match='no text metric "bleu_4"'):
        db.execute("select ragsql.text_score('bleu_4', 'a', array['b'], 'en')")


def test_id_based_context_precision_and_recall_as_ragas_defines_them(db):
    """RAGAS's example: retrieved doc_1, doc_2, doc_3 (doc_1 twice counts once), reference doc_1, doc_4 ->
    precision 1/3, recall 1/2; grade 0 is not a reference id; no contexts or no gold ids: null with the reason."""
    dataset = load.ensure_dataset(db, "ids")
    load.add_queries(db, dataset, [("q1", "?", "en", None), ("q2", "?", "en", None), ("q3", "?", "en", None)])
    load.add_judgments(db, dataset, [("q1", "doc_1", 1, None), ("q1", "doc_4", 2, None), ("q1", "doc_2", 0, None),
                                     ("q3", "doc_9", 0, None)])
    run = load.create_run(db, "ctx", dataset)
    load.add_answers(db, run, [("q1", "a", None), ("q2", "b", None), ("q3", "c", None)],
                     [("q1", 1, "doc_1", "x"), ("q1", 2, "doc_2", "y"), ("q1", 3, "doc_3", "z"), ("q1", 4, "doc_1", "x"),
                      ("q3", 1, "doc_9", "w")])
    rows = db.execute("select qid, metric, value, reason from ragsql.evaluate_generation('ctx', "
                      "array['id_based_context_precision', 'id_based_context_recall'])").fetchall()
    got = {(q, m): (v, why) for q, m, v, why in rows}
    assert got["q1", "id_based_context_precision"] == (pytest.approx(1 / 3), None)
    assert got["q1", "id_based_context_recall"] == (0.5, None)
    assert got["q2", "id_based_context_recall"] == (None, "no retrieved contexts")
    assert got["q3", "id_based_context_precision"] == (None, "no reference context ids")


# --- collation independence: the official SQuAD script, character by character, under "C" ---------------------


def official_normalize_answer(s):
    """normalize_answer of the official SQuAD evaluation script (v1.1 and v2.0 are the same), verbatim."""
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def official_exact_match(prediction, ground_truth):
    return float(official_normalize_answer(prediction) == official_normalize_answer(ground_truth))


def official_f1(prediction, ground_truth):
    """f1_score of SQuAD v1.1 with v2.0's one addition (two answers that normalise to nothing: 1, as the SQL)."""
    prediction_tokens = official_normalize_answer(prediction).split()
    ground_truth_tokens = official_normalize_answer(ground_truth).split()
    if not prediction_tokens or not ground_truth_tokens:
        return float(prediction_tokens == ground_truth_tokens)
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


UNICODE_WORDS = ["ÉCOLE", "école", "Ça", "ÀÉÎÕÜ", "ẞ", "ǅungla", "K", "Ω", "ΟΔΟΣ", "οδος", "ΣΟΦΟΣ", "Σ", "ΑΣ\u0345",
                 "İSTANBUL", "istanbul", "i\u0307stanbul", "İ", "IŞIK", "the", "THE", "The", "a", "A", "an", "AN",
                 "éa", "aé", "the²", "²the", "½an", "Ⅻa", "東the", "cat", "Einstein's", "U.S.", "1905", "«the»", "—a—",
                 "¿an?", "the…", "(a)", "l'école", "_the_"]
UNICODE_GAPS = [" ", " ", " ", "\u00a0", "\u001c", "\u001d", "\u001e", "\u001f", "\u0085", "\u2028", "\u2029",
                "\u3000", "\u2009", "\u202f", "\t", "\n", "", ",", ". ", "!", "\u200b", "\u00ad"]


def unicode_text(rng: random.Random) -> str:
    return rng.choice(["", " ", "\u00a0"]) + "".join(
        rng.choice(UNICODE_WORDS) + rng.choice(UNICODE_GAPS) for _ in range(rng.randint(1, 8)))


def unicode_pairs(seed: int, n: int) -> list[tuple[str, str]]:
    """Pairs rich in what collations and Python disagree on: half of them one text against its upper-cased,
    lower-cased or re-spaced self, so equal answers are common."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        a = unicode_text(rng)
        b = rng.choice([unicode_text(rng), a.upper(), a.lower(), a.replace(" ", "\u00a0"),
                        a.replace(" ", "\u3000") + "\u0085", unicode_text(rng)])
        pairs.append((a, b))
    return pairs


@pytest.fixture(scope="module")
def c_collation_url(server_url, template_url):
    """A database created with the "C" collation and character type, sql/ installed: text metrics must not move."""
    name = f"ragsql_c_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"create database \"{name}\" template template0 encoding 'UTF8' lc_collate 'C' lc_ctype 'C'")
    url = _with_dbname(server_url, name)
    with psycopg.connect(url) as conn:
        install(conn)
        conn.commit()
    yield url
    drop_database(server_url, name)


@pytest.fixture(params=["default", "C"])
def each_db(request, c_collation_url):
    """A connection to the suite's test database, then to the one created with the "C" collation (rolled back)."""
    if request.param == "default":
        yield request.getfixturevalue("db")
        return
    conn = psycopg.connect(c_collation_url)
    try:
        assert conn.execute("select datcollate from pg_database where datname = current_database()").fetchone() == ("C",)
        yield conn
    finally:
        conn.rollback()
        conn.close()


def test_exact_match_and_token_f1_equal_the_official_squad_script_under_every_collation(each_db):
    """500 Unicode-rich pairs (accented capitals, final sigma, Turkish İ, NBSP, U+001C..U+001F, U+0085, U+2028,
    U+3000, punctuation, articles next to letters, digits and symbols): exact_match and token_f1 equal the official
    SQuAD functions bit for bit."""
    pairs = unicode_pairs(26, 500) + [("ÉCOLE", "école"), ("the\u00a0cat", "cat"), ("ΟΔΟΣ", "οδος"), ("İ", "i\u0307")]
    got = scores(each_db, [(a, r, "en") for a, r in pairs])
    wrong = [(a, r, m, want, value[m]) for (a, r), value in zip(pairs, got)
             for m, want in (("exact_match", official_exact_match(a, r)), ("token_f1", official_f1(a, r)))
             if float(want).hex() != float(value[m]).hex()]
    assert not wrong, (len(wrong), wrong[:5])
    assert [v["exact_match"] for v in got[-4:]] == [1.0, 1.0, 1.0, 1.0]
    assert sum(v["exact_match"] for v in got) > 100 and 0 < sum(v["token_f1"] for v in got)


def test_python_lower_and_squad_tokens_equal_python_on_every_bmp_character(each_db):
    """ragsql.python_lower equals str.lower() on each of U+0001..U+FFFF alone, and squad_tokens equals
    normalize_answer(...).split() with each character between and beside articles (its \\w, spaces and case)."""
    chars = [chr(c) for c in range(1, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    sigma = ["ΟΔΟΣ", "Σ", "ΑΣ Σ", "Α\u0345Σ", "1\u0345Σ", "ΑΣ'Β", "ΑΣ'", "ΣΣ", "Α.Σ", "ΑΣ\u0345Β", "aΣb"]
    lowered = each_db.execute("select array_agg(ragsql.python_lower(u.x) order by u.n) "
                              "from unnest(%s::text[]) with ordinality as u(x, n)", (chars + sigma,)).fetchone()[0]
    assert [(t, got) for t, got in zip(chars + sigma, lowered) if got != t.lower()] == []
    texts = ["a" + ch + "a the " + ch + "an" + ch + "The" for ch in chars]
    rows = each_db.execute("select array_to_json(ragsql.squad_tokens(u.x))::text "
                           "from unnest(%s::text[]) with ordinality as u(x, n) order by u.n", (texts,)).fetchall()
    import json
    wrong = [(t, got) for t, (got,) in zip(texts, rows) if json.loads(got) != official_normalize_answer(t).split()]
    assert wrong == []


def test_every_text_metric_gives_the_same_bits_under_the_c_collation(db, c_collation_url):
    """Every text metric on Unicode-rich English and Chinese pairs: bit-identical in a database created with the
    "C" collation and in the suite's database."""
    rng = random.Random(7)
    pairs = [(a, r, "en") for a, r in unicode_pairs(8, 40)]
    pairs += [(zh_text(rng) + rng.choice(UNICODE_WORDS), zh_text(rng) + rng.choice(UNICODE_GAPS) + "İ", "zh")
              for _ in range(20)]
    pairs += [("ÉCOLE\u3000l'İle", "école l'i\u0307le", "en"), ("长江 ÉCOLE\u3000", "\u3000长江 école", "zh")]
    with psycopg.connect(c_collation_url) as c_db:
        under_c = scores(c_db, pairs)
    here = scores(db, pairs)
    wrong = [(p, m, a[m], b[m]) for p, a, b in zip(pairs, here, under_c) for m in METRICS
             if (a[m] is None) != (b[m] is None) or (a[m] is not None and a[m].hex() != b[m].hex())]
    assert not wrong, (len(wrong), wrong[:5])
    assert here[-2]["exact_match"] == 1.0 and here[-1]["exact_match"] == 1.0
