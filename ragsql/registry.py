"""Every metric ragsql computes, declared once.

A generation metric (`METRICS`): what it reads, its judge task kind, its direction and range, whether it is computed
by default, and the SQL that computes it. Derived from it: the judge's task plan and skip rules (`KINDS`), `ragsql
judge --metrics`, judge-check's pair kinds, the rows of `ragsql.generation_metric` and `ragsql._metric_calls`, the
dispatch of `ragsql.evaluate_generation` (sql/functions/29_metric_registry.sql), and the metric reference
(docs/metrics.md).

A retrieval measure (`MEASURES`): its parameters and the spellings trec_eval and ranx users type, from which
ragsql.measure_alias and the parsing of measure names derive (sql/functions/09_measure_registry.sql).

`python -m ragsql.registry_files` writes the derived files. Adding a metric: docs/adding-a-metric.md. This module
imports nothing of ragsql, so every layer may read it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "HEADLINE_MEASURES",
    "INPUTS",
    "KINDS",
    "MEASURES",
    "METRICS",
    "YES_NO",
    "JudgeKind",
    "Measure",
    "Metric",
    "kind",
    "metric",
    "metric_or_none",
    "resolve",
    "resolve_object",
    "yes_no",
]

INPUTS = {
    "answer": "the answer",
    "contexts": "the answer's contexts",
    "reference": "a reference answer",
    "gold": "the query's gold ids (qrels)",
    "cites": "an answer that cites its contexts",
}
"""What a metric may read besides the question; a kind whose every metric needs an input is skipped for a run that
has none (cites only when no metric was named: an answer may cite nothing)."""

JUDGE_ARGS = "run, model, prompt_version"
"""The arguments of most metric functions: the run, and the verdict set asked for (NULL: the newest)."""


@dataclass(frozen=True)
class Metric:
    """One generation metric. `name` is how it is stored, asked for and shown; a name ending in `:<name>` is a
    family whose members are rows the user adds (aspect:<name>, rubrics_score:<name>)."""

    name: str
    description: str
    sql: str
    """The SQL call returning its per-query rows inside `ragsql._evaluate_generation`, where `metric` (the name asked
    for), `run`, `rid` (its id), `model`, `prompt_version`, `embedder` and the weights are in scope."""
    task: str | None = None
    """The judge task kind whose verdicts it reads; None: computed from the stored data alone."""
    needs: tuple[str, ...] = ("answer",)
    """Inputs it reads besides the question (keys of INPUTS)."""
    needs_any: tuple[str, ...] = ()
    """Inputs of which it reads the first present (at least one is needed)."""
    higher_is_better: bool = True
    scale: tuple[float, float] = (0.0, 1.0)
    default: bool = True
    """Judged when no metric is named (`ragsql judge`, `ragsql.evaluate(metrics=None)`); an opt-in one costs
    calls the default metrics do not share."""
    judge_check: bool = False
    """Its kind can be measured on labelled pairs (`ragsql judge-check`)."""
    headline: bool = False
    """Shown in the demo's summary and the report's headline table."""
    reviewed_statements: tuple[str, ...] = ()
    """The statement verdicts (by purpose) a review sheet shows for it, each labelled as feeding it."""
    tested_against: str = "hand-computed cases"
    yes_no: bool = False
    """Its kind asks one yes/no question of each answer with its own prompt files (see `yes_no`)."""
    template: bool = field(default=False)
    """A family of user-defined members (`aspect:<name>`); not a row of ragsql.generation_metric itself."""
    aliases: tuple[str, ...] = ()
    """Its names in RAGAS and DeepEval (their metric classes), matched without regard to case; `resolve` maps
    them, and metric objects of those classes, to `name`."""

    @property
    def computed_by(self) -> str | None:
        """The SQL function of a metric with no judge task (its family in ragsql.generation_metric)."""
        return None if self.task else self.sql.split("(", 1)[0].removeprefix("ragsql.")


def yes_no(name: str, description: str, needs: tuple[str, ...] = ("answer",), **declared) -> Metric:
    """A metric that is the judge's yes (1) or no (0) on one question about each answer, asked by its own prompt
    files ragsql/judge/kinds/<name>/en.txt and zh.txt (a `Task: <name>` system section that asks for
    `{"verdict": true, "reason": "..."}`, and a user section). Its judge kind has its name; its verdicts are kept in
    ragsql.yes_no_verdict and read by ragsql.yes_no_metric."""
    return Metric(
        name, description, "ragsql.yes_no_metric(run, metric, model, prompt_version)", task=name, needs=needs,
        yes_no=True, **declared,
    )  # fmt: skip


_RAGAS = "RAGAS's formula on verdicts of the project's fake endpoint"
_STATEMENTS = "seed worked examples (faithfulness 4.2, context recall 5.3); " + _RAGAS
_SQUAD = "the official SQuAD v2 and CMRC 2018 evaluation scripts"
_SACREBLEU = "sacrebleu"


def _text(name: str, description: str, tested_against: str, aliases: tuple[str, ...] = ()) -> Metric:
    return Metric(
        name, description, "ragsql.text_metric(run, metric)", needs=("answer", "reference"),
        tested_against=tested_against, aliases=aliases,
    )  # fmt: skip


def _by_ids(name: str, description: str, function: str, aliases: tuple[str, ...] = ()) -> Metric:
    return Metric(
        name, description, f"ragsql.{function}(run, metric)", needs=("contexts", "gold"),
        tested_against="RAGAS's formula on the same rows and on RAGAS's own docs examples", aliases=aliases,
    )  # fmt: skip


METRICS: tuple[Metric, ...] = (
    Metric(
        "faithfulness", "answer statements supported by the contexts / answer statements",
        f"ragsql.faithfulness({JUDGE_ARGS}, partial_weight)", task="faithfulness", needs=("answer", "contexts"),
        judge_check=True, headline=True, reviewed_statements=("faithfulness",), tested_against=_STATEMENTS,
        # DeepEval's is approximate: it counts a claim unfaithful only when the contexts contradict it
        aliases=("Faithfulness", "FaithfulnessMetric"),
    ),
    Metric(
        "contradiction_rate", "answer statements contradicted by the contexts / answer statements",
        f"ragsql.contradiction_rate({JUDGE_ARGS})", task="faithfulness", needs=("answer", "contexts"),
        higher_is_better=False, tested_against=_STATEMENTS,
    ),
    Metric(
        "answer_relevancy",
        "mean cosine of generated questions to the question; 0 if the answer is non-committal (RAGAS)",
        f"ragsql.answer_relevancy({JUDGE_ARGS}, embedder)", task="answer_relevancy", judge_check=True,
        headline=True, tested_against="seed worked example (answer relevancy 4.3); " + _RAGAS,
        # DeepEval's is approximate: the share of the answer's statements relevant to the question, no cosine
        aliases=("ResponseRelevancy", "AnswerRelevancy", "AnswerRelevancyMetric"),
    ),
    Metric(
        "answer_relevancy_rating",
        "(judge score 1-5 - 1) / 4; one more call per answer, so judged only when asked for",
        f"ragsql.answer_relevancy_rating({JUDGE_ARGS})", task="answer_relevancy_rating", default=False,
        judge_check=True, tested_against="seed rag-eval-core-dimensions 4.3.2.1.1 (5 -> 1.0, 4 -> 0.75, 1 -> 0)",
    ),
    Metric(
        "answer_relevancy_cosine", "cosine of question and answer embeddings",
        "ragsql.answer_relevancy_cosine(run, coalesce(embedder, ragsql._run_embedder(rid, null, model)))",
        task="answer_relevancy", tested_against="numpy cosine of the stored embeddings",
    ),
    Metric(
        "context_precision", "ContextPrecision over the contexts with the judge's usefulness verdicts as rel_i",
        f"ragsql.context_precision({JUDGE_ARGS})", task="context_precision", needs=("contexts",),
        needs_any=("reference", "answer"),
        judge_check=True, headline=True, tested_against="seed worked example (context precision 5.2); " + _RAGAS,
        # The judge reads the reference when the record has one, else the answer: each RAGAS class is exact only on
        # records of its kind. RAGAS's bare ContextPrecision is left out: it is the retrieval measure's name here.
        aliases=(
            "LLMContextPrecisionWithReference", "LLMContextPrecisionWithoutReference", "ContextualPrecisionMetric",
        ),
    ),
    Metric(
        "context_relevance", "context sentences relevant to the question / context sentences",
        f"ragsql.context_relevance({JUDGE_ARGS})", task="context_relevance", needs=("contexts",),
        judge_check=True, tested_against=_RAGAS,
        aliases=("ContextualRelevancyMetric",),  # approximate: DeepEval splits the contexts into statements
    ),
    Metric(
        "context_recall", "reference statements supported by the contexts / reference statements",
        f"ragsql.context_recall({JUDGE_ARGS}, partial_weight)", task="context_recall",
        needs=("contexts", "reference"), judge_check=True, headline=True, reviewed_statements=("context_recall",),
        tested_against=_STATEMENTS, aliases=("LLMContextRecall", "ContextRecall", "ContextualRecallMetric"),
    ),
    Metric(
        "answer_similarity", "mean over reference answers of cosine(answer, reference)",
        "ragsql.answer_similarity(run, coalesce(embedder, ragsql._run_embedder(rid, null, model)))",
        task="answer_similarity", needs=("answer", "reference"), judge_check=True,
        tested_against="numpy cosine of the stored embeddings", aliases=("AnswerSimilarity", "SemanticSimilarity"),
    ),
    Metric(
        "answer_correctness_f1", "TP / (TP + (FP + FN) / 2), 0 when TP = 0",
        f"ragsql.answer_correctness_f1({JUDGE_ARGS})", task="answer_correctness", needs=("answer", "reference"),
        tested_against=_RAGAS,
    ),
    Metric(
        "answer_correctness",
        "(w_f * F1 + w_s * answer_similarity) / (w_f + w_s), default w_f = 0.75, w_s = 0.25",
        f"ragsql.answer_correctness({JUDGE_ARGS}, embedder, factual_weight, similarity_weight)",
        task="answer_correctness", needs=("answer", "reference"), judge_check=True, headline=True,
        reviewed_statements=("correctness_answer", "correctness_reference"),
        tested_against="seed worked example (answer correctness 6.2); " + _RAGAS, aliases=("AnswerCorrectness",),
    ),
    Metric(
        "aspect:<name>",
        "1 when the judge answers yes to the aspect's question (`ragsql aspect add`), else 0; the aspect says its "
        "direction",
        "ragsql.aspect_critique(run, substr(metric, length('aspect:') + 1), model, prompt_version)",
        task="aspect_critique", tested_against="RAGAS AspectCritic's verdict", template=True,
        aliases=("AspectCritic",),  # a member: an AspectCritic object's name
    ),
    Metric(
        "citation_coverage", "answer sentences with a citation / answer sentences",
        f"ragsql.citation_coverage({JUDGE_ARGS})", task="citations", needs=("answer", "cites"), headline=True,
        tested_against="seed retrieval-metrics 5.1",
    ),
    Metric(
        "citation_validity", "citations whose cited item supports the sentence / citations",
        f"ragsql.citation_validity({JUDGE_ARGS})", task="citations", needs=("answer", "cites"),
        tested_against="seed retrieval-metrics 5.1",
    ),
    _text(
        "exact_match",
        "answer = a reference after normalisation: SQuAD v2 (lower case, punctuation and articles removed) for "
        "space-delimited text, CMRC 2018 (punctuation removed) for Chinese; max over the references",
        _SQUAD,
        ("ExactMatch",),  # approximate: RAGAS compares the raw strings, without normalising
    ),
    _text(
        "token_f1",
        "bag-of-tokens F1 of answer and reference (SQuAD v2), or F1 of their longest common run of CMRC 2018 "
        "segments (Chinese characters and other tokens); max over the references",
        _SQUAD,
    ),
    _text(
        "rouge_l",
        "ROUGE-L F1 (longest common subsequence of lower-cased alphanumeric tokens, each CJK character a token; "
        "rouge-score without stemming); max over the references",
        "rouge-score",
        ("RougeScore",),  # approximate: RAGAS's default rougeL F1 stems the tokens
    ),
    _text(
        "bleu",
        "sentence BLEU of the answer against all its references, as sacrebleu's sentence_bleu (13a tokens, zh for "
        "Chinese), in [0, 1]",
        _SACREBLEU,
        ("BleuScore",),  # approximate: RAGAS takes sacrebleu's corpus_bleu of the pair
    ),
    _text(
        "chrf",
        "sentence chrF (character 6-grams, beta 2) as sacrebleu's sentence_chrf, in [0, 1]; max over the references",
        _SACREBLEU,
    ),
    _text(
        "string_presence", "1 when a reference appears verbatim in the answer, else 0 (RAGAS)", "RAGAS StringPresence",
        ("StringPresence",),
    ),
    _text(
        "levenshtein_similarity",
        "1 - Levenshtein distance / length of the longer text (RAGAS NonLLMStringSimilarity); max over the references",
        "rapidfuzz's Levenshtein distance",
        ("NonLLMStringSimilarity",),  # its default distance, Levenshtein
    ),
    _by_ids(
        "id_based_context_precision",
        "share of the distinct ids of the answer's contexts that are gold (relevance >= 1) ids of the query (RAGAS); "
        "NULL with the reason when either id list is empty, where RAGAS gives NaN (no retrieved id) or 0 (no "
        "reference id)",
        "context_id_metric",
        ("IDBasedContextPrecision",),
    ),
    _by_ids(
        "id_based_context_recall",
        "share of the query's gold ids (relevance >= 1) among the ids of the answer's contexts (RAGAS); NULL with "
        "the reason when either id list is empty, where RAGAS gives 0 (no retrieved id) or NaN (no reference id)",
        "context_id_metric",
        ("IDBasedContextRecall",),
    ),
    Metric(
        "response_groundedness",
        "mean of two judge passes' 0/1/2 rating of how far the contexts support the answer, / 2 (RAGAS, NVIDIA)",
        f"ragsql.response_groundedness({JUDGE_ARGS})", task="response_groundedness", needs=("answer", "contexts"),
        default=False, tested_against=_RAGAS, aliases=("ResponseGroundedness",),
    ),
    Metric(
        "nv_context_relevance",
        "mean of two judge passes' 0/1/2 rating of how relevant the contexts are to the question, / 2 (RAGAS "
        "ContextRelevance, NVIDIA)",
        f"ragsql.nv_context_relevance({JUDGE_ARGS})", task="nv_context_relevance", needs=("contexts",),
        default=False, tested_against=_RAGAS, aliases=("ContextRelevance",),
    ),
    Metric(
        "context_entity_recall",
        "|entities of the reference answers that the contexts name| / |entities of the reference answers| (RAGAS)",
        f"ragsql.context_entity_recall({JUDGE_ARGS})", task="context_entity_recall",
        needs=("contexts", "reference"), default=False, tested_against=_RAGAS, aliases=("ContextEntityRecall",),
    ),
    *(
        Metric(
            f"factual_correctness(mode={mode})", description,
            "ragsql.factual_correctness(run, substring(metric from '\\(mode=(\\w+)\\)'), 1.0, null, null, "
            "model, prompt_version)",
            task="factual_correctness", needs=("answer", "reference"), default=False, tested_against=_RAGAS,
            # RAGAS's default mode; an object's own mode: resolve_object
            aliases=("FactualCorrectness",) if mode == "f1" else (),
        )
        for mode, description in (
            ("f1", "F-beta (beta 1) of the answer's claims supported by the reference (TP, else FP) and the "
                   "reference's claims the answer misses (FN) (RAGAS)"),
            ("precision", "answer claims the reference supports / answer claims (RAGAS)"),
            ("recall", "TP / (TP + reference claims the answer does not support) (RAGAS)"),
        )
    ),  # fmt: skip
    *(
        Metric(
            f"noise_sensitivity(mode={mode})", description,
            "ragsql.noise_sensitivity(run, substring(metric from '\\(mode=(\\w+)\\)'), model, prompt_version)",
            task="noise_sensitivity", needs=("answer", "contexts", "reference"), higher_is_better=False,
            default=False, tested_against=_RAGAS,
            aliases=("NoiseSensitivity",) if mode == "relevant" else (),  # RAGAS's default mode
        )
        for mode, description in (
            ("relevant", "answer statements that a relevant context supports but the reference does not / answer "
                         "statements (RAGAS; lower is better)"),
            ("irrelevant", "answer statements that only an irrelevant context supports and the reference does not "
                           "/ answer statements (RAGAS; lower is better)"),
        )
    ),  # fmt: skip
    *(
        Metric(
            f"rubrics_score:{rubric}", description,
            "ragsql.rubrics_score(run, substr(metric, length('rubrics_score:') + 1), model, prompt_version)",
            task="rubrics_score", needs=needs, scale=(1.0, 5.0), default=False, tested_against=_RAGAS,
            template=rubric == "<name>",
            aliases=("RubricsScore",) if rubric == "default" else (),  # RAGAS's default rubrics
        )
        for rubric, needs, description in (
            ("default", ("answer",),
             "the judge's 1-5 score by RAGAS's reference-free default rubric (RAGAS rubrics_score; not scaled)"),
            ("reference", ("answer", "reference"),
             "the judge's 1-5 score by RAGAS's default rubric with reference (RAGAS rubrics_score; not scaled)"),
            ("<name>", ("answer",), "the judge's 1-5 score by a rubric of `ragsql rubric add` (not scaled)"),
        )
    ),  # fmt: skip
    *(
        Metric(
            name, description, "ragsql.string_context_metric(run, metric)", needs=("contexts", "gold"),
            tested_against="RAGAS's non-LLM metrics on the same rows", aliases=(alias,),
        )
        for name, alias, description in (
            ("non_llm_context_precision_with_reference", "NonLLMContextPrecisionWithReference",
             "ContextPrecision over the answer's contexts with rel_i = 1 when the context's best Levenshtein "
             "similarity to a gold text (relevance >= 1) is >= 0.5 (RAGAS NonLLMContextPrecisionWithReference)"),
            ("non_llm_context_recall", "NonLLMContextRecall",
             "share of the gold texts (relevance >= 1) whose best Levenshtein similarity to a context of the answer "
             "is > 0.5 (RAGAS NonLLMContextRecall)"),
        )
    ),  # fmt: skip
)  # fmt: skip


@dataclass(frozen=True)
class JudgeKind:
    """A judge task kind: one task per answer, its verdicts read by the metrics whose `task` it is."""

    name: str
    metrics: tuple[Metric, ...]

    @property
    def default(self) -> bool:
        """Judged when no metric is named: some metric of it is a default one."""
        return any(m.default for m in self.metrics)

    @property
    def needs(self) -> tuple[str, ...]:
        """Inputs every metric of it needs: without them the kind has nothing to judge."""
        return tuple(n for n in INPUTS if all(n in m.needs for m in self.metrics))

    @property
    def needs_any(self) -> tuple[str, ...]:
        """Inputs of which every metric of it needs one."""
        return next((m.needs_any for m in self.metrics if m.needs_any), ())

    @property
    def judge_check(self) -> bool:
        return any(m.judge_check for m in self.metrics)

    @property
    def sides(self) -> tuple[str, ...]:
        """What a labelled pair's sides carry for it (judge-check): its needs among answer, contexts, reference."""
        return tuple(n for n in ("answer", "contexts", "reference") if n in self.needs)


YES_NO = tuple(m.name for m in METRICS if m.yes_no)
"""The yes/no metrics: each a judge kind of its own, with its own prompt files."""

KINDS: dict[str, JudgeKind] = {
    name: JudgeKind(name, tuple(m for m in METRICS if m.task == name))
    for name in dict.fromkeys(m.task for m in METRICS if m.task)
}
"""Judge task kinds by name, in the order of their first metric. `ragsql judge --metrics` names these."""


def metric(name: str) -> Metric:
    """The declaration of a metric (a family member `aspect:x` gives its family's)."""
    for m in METRICS:
        if m.name == name or (m.template and name.startswith(m.name.split("<", 1)[0])):
            return m
    raise KeyError(name)


def metric_or_none(name: str) -> Metric | None:
    """The declaration of a metric, or None for a name that is none (a retrieval measure)."""
    try:
        return metric(name)
    except KeyError:
        return None


_BY_ALIAS = {a.lower(): m for m in METRICS for a in m.aliases}


def resolve(name: str) -> str:
    """ragsql's name of a metric named as RAGAS or DeepEval name it (any case); any other name as it is given."""
    found = _BY_ALIAS.get(name.strip().lower())
    if found is None:
        return name
    if found.template:
        raise ValueError(f"{name.strip()} is a family here: name a member, {found.name}")
    return found.name


def resolve_object(obj: object) -> str | None:
    """ragsql's name of a RAGAS or DeepEval metric object (its class is an alias), None for another object: its own
    `mode` (FactualCorrectness, NoiseSensitivity) picks the family member, an AspectCritic's `name` the aspect."""
    found = _BY_ALIAS.get(type(obj).__name__.lower())
    if found is None:
        return None
    member = getattr(obj, "name", None) if found.template else None
    if found.template and isinstance(member, str) and member.strip():
        return found.name.split("<", 1)[0] + member.strip()
    mode = getattr(obj, "mode", None)
    if "(mode=" in found.name and isinstance(mode, str) and mode.isidentifier():
        return found.name.split("(mode=", 1)[0] + f"(mode={mode})"
    return resolve(type(obj).__name__)


def kind(name: str) -> JudgeKind:
    """A judge task kind by name."""
    return KINDS[name]


@dataclass(frozen=True)
class Measure:
    """A retrieval measure, as ir_measures declares one: its name (ragsql's spelling), its parameters, the spellings
    trec_eval and ranx users type, and whether the run value sums the queries' (a count) instead of averaging."""

    name: str
    description: str
    cutoff: str = "optional"
    """`required` (P@k), `optional` (without @k: the whole ranking) or `none`."""
    rel: bool = True
    """Takes a relevance level, rel=<grade> (else it reads the grades themselves)."""
    p: float | None = None
    """Takes a persistence p=<p>, with this default (RBP)."""
    count: bool = False
    aliases: tuple[str, ...] = ()
    """Other spellings, as regular expressions over the lower-cased name; a group `([0-9]+)` is the cutoff."""
    tested_against: str = "trec_eval's own values on TREC data; pytrec_eval and ranx on generated runs"


_K = "([0-9]+)"
MEASURES: tuple[Measure, ...] = (
    Measure("Success", "1 when a relevant item is among the first k, else 0",
            aliases=(f"success[_.]{_K}", f"hit_rate@{_K}", "hit_rate")),
    Measure("R", "relevant items among the first k / relevant items", aliases=(f"recall[_.]{_K}", f"recall@{_K}")),
    Measure("P", "relevant items among the first k / k", cutoff="required",
            aliases=(f"p[_.]{_K}", f"precision@{_K}")),
    Measure("RR", "1 / rank of the first relevant item among the first k (0 if none)",
            aliases=(f"mrr@{_K}", "mrr", "recip_rank")),
    Measure("nDCG", "DCG / ideal DCG over the first k, gain = the grade, discount log2(rank + 1) (trec_eval)",
            rel=False, aliases=(f"ndcg_cut[_.]{_K}", f"ndcg@{_K}", "ndcg")),
    Measure("nDCG_burges", "nDCG with gain 2^grade - 1 (Burges et al., ranx's ndcg_burges)", rel=False,
            tested_against="ranx's ndcg_burges on generated runs",
            aliases=(f"ndcg_burges@{_K}",)),
    Measure("AP", "mean over relevant items of precision at their rank (0 for those not in the first k)",
            aliases=(f"map_cut[_.]{_K}", f"map@{_K}", "map")),
    Measure("ContextPrecision", "mean of precision@i over the relevant ranks i among the first k (RAGAS)",
            tested_against="the seed's worked example; RAGAS's formula"),
    Measure("Rprec", "precision at rank R, the number of relevant items", cutoff="none",
            aliases=("r-precision", "r_precision")),
    Measure("F1", "harmonic mean of P@k and R@k", cutoff="required", tested_against="ranx's f1 on generated runs"),
    Measure("Bpref", "binary preference: relevant items ranked above judged non-relevant ones", cutoff="none"),
    Measure("infAP", "inferred AP over a sampled pool (unjudged items are skipped)", cutoff="none"),
    Measure("ERR", "expected reciprocal rank over the first k, from the grades", rel=False,
            tested_against="gdeval through ir_measures"),
    Measure("RBP", "rank-biased precision with persistence p (default 0.8)", p=0.8,
            tested_against="cwl_eval through ir_measures"),
    Measure("Judged", "judged items among the first k / k", rel=False, tested_against="ir_measures"),
    Measure("NumRet", "results retrieved (with rel: relevant ones retrieved)", cutoff="none", count=True,
            aliases=("num_ret",)),
    Measure("NumRel", "relevant items judged", cutoff="none", count=True, aliases=("num_rel",)),
    Measure("NumRelRet", "relevant items retrieved", cutoff="none", count=True, aliases=("num_rel_ret",)),
)  # fmt: skip
"""Every retrieval measure ragsql.evaluate computes (its formula: ragsql._evaluate, sql/functions/10_measure.sql)."""

HEADLINE_MEASURES = ("Success@1", "Success@5", "R@10", "RR@10", "nDCG@10")
"""The retrieval measures the demo's summary and the report's headline table show."""
