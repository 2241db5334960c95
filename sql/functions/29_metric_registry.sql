-- Written by `python -m ragsql.registry_files` from ragsql/registry.py: edit that, not this file.

-- The built-in generation metrics, as the registry declares them, at positions 1..999 (a rubric of `ragsql rubric
-- add` adds its own row at 1001 and up). Their positions are set aside first, so that a metric declared between two
-- others moves them without a clash of the unique position; a built-in the registry no longer declares goes.
update ragsql.generation_metric set position = -position where position between 1 and 999;
insert into ragsql.generation_metric
    (metric, position, task_kind, needs_reference, higher_is_better, computed_by, description)
values
    ('faithfulness', 1, 'faithfulness', false, true,
     null,
     'answer statements supported by the contexts / answer statements'),
    ('contradiction_rate', 2, 'faithfulness', false, false,
     null,
     'answer statements contradicted by the contexts / answer statements'),
    ('answer_relevancy', 3, 'answer_relevancy', false, true,
     null,
     'mean cosine of generated questions to the question; 0 if the answer is non-committal (RAGAS)'),
    ('answer_relevancy_rating', 4, 'answer_relevancy_rating', false, true,
     null,
     '(judge score 1-5 - 1) / 4; one more call per answer, so judged only when asked for'),
    ('answer_relevancy_cosine', 5, 'answer_relevancy', false, true,
     null,
     'cosine of question and answer embeddings'),
    ('context_precision', 6, 'context_precision', false, true,
     null,
     'ContextPrecision over the contexts with the judge''s usefulness verdicts as rel_i'),
    ('context_relevance', 7, 'context_relevance', false, true,
     null,
     'context sentences relevant to the question / context sentences'),
    ('context_recall', 8, 'context_recall', true, true,
     null,
     'reference statements supported by the contexts / reference statements'),
    ('answer_similarity', 9, 'answer_similarity', true, true,
     null,
     'mean over reference answers of cosine(answer, reference)'),
    ('answer_correctness_f1', 10, 'answer_correctness', true, true,
     null,
     'TP / (TP + (FP + FN) / 2), 0 when TP = 0'),
    ('answer_correctness', 11, 'answer_correctness', true, true,
     null,
     '(w_f * F1 + w_s * answer_similarity) / (w_f + w_s), default w_f = 0.75, w_s = 0.25'),
    ('citation_coverage', 12, 'citations', false, true,
     null,
     'answer sentences with a citation / answer sentences'),
    ('citation_validity', 13, 'citations', false, true,
     null,
     'citations whose cited item supports the sentence / citations'),
    ('exact_match', 14, null, true, true,
     'text_metric',
     'answer = a reference after normalisation: SQuAD v2 (lower case, punctuation and articles removed) for space-delimited text, CMRC 2018 (punctuation removed) for Chinese; max over the references'),
    ('token_f1', 15, null, true, true,
     'text_metric',
     'bag-of-tokens F1 of answer and reference (SQuAD v2), or F1 of their longest common run of CMRC 2018 segments (Chinese characters and other tokens); max over the references'),
    ('rouge_l', 16, null, true, true,
     'text_metric',
     'ROUGE-L F1 (longest common subsequence of lower-cased alphanumeric tokens, each CJK character a token; rouge-score without stemming); max over the references'),
    ('bleu', 17, null, true, true,
     'text_metric',
     'sentence BLEU of the answer against all its references, as sacrebleu''s sentence_bleu (13a tokens, zh for Chinese), in [0, 1]'),
    ('chrf', 18, null, true, true,
     'text_metric',
     'sentence chrF (character 6-grams, beta 2) as sacrebleu''s sentence_chrf, in [0, 1]; max over the references'),
    ('string_presence', 19, null, true, true,
     'text_metric',
     '1 when a reference appears verbatim in the answer, else 0 (RAGAS)'),
    ('levenshtein_similarity', 20, null, true, true,
     'text_metric',
     '1 - Levenshtein distance / length of the longer text (RAGAS NonLLMStringSimilarity); max over the references'),
    ('id_based_context_precision', 21, null, false, true,
     'context_id_metric',
     'share of the distinct ids of the answer''s contexts that are gold (relevance >= 1) ids of the query (RAGAS); NULL with the reason when either id list is empty, where RAGAS gives NaN (no retrieved id) or 0 (no reference id)'),
    ('id_based_context_recall', 22, null, false, true,
     'context_id_metric',
     'share of the query''s gold ids (relevance >= 1) among the ids of the answer''s contexts (RAGAS); NULL with the reason when either id list is empty, where RAGAS gives 0 (no retrieved id) or NaN (no reference id)'),
    ('response_groundedness', 23, 'response_groundedness', false, true,
     null,
     'mean of two judge passes'' 0/1/2 rating of how far the contexts support the answer, / 2 (RAGAS, NVIDIA)'),
    ('nv_context_relevance', 24, 'nv_context_relevance', false, true,
     null,
     'mean of two judge passes'' 0/1/2 rating of how relevant the contexts are to the question, / 2 (RAGAS ContextRelevance, NVIDIA)'),
    ('context_entity_recall', 25, 'context_entity_recall', true, true,
     null,
     '|entities of the reference answers that the contexts name| / |entities of the reference answers| (RAGAS)'),
    ('factual_correctness(mode=f1)', 26, 'factual_correctness', true, true,
     null,
     'F-beta (beta 1) of the answer''s claims supported by the reference (TP, else FP) and the reference''s claims the answer misses (FN) (RAGAS)'),
    ('factual_correctness(mode=precision)', 27, 'factual_correctness', true, true,
     null,
     'answer claims the reference supports / answer claims (RAGAS)'),
    ('factual_correctness(mode=recall)', 28, 'factual_correctness', true, true,
     null,
     'TP / (TP + reference claims the answer does not support) (RAGAS)'),
    ('noise_sensitivity(mode=relevant)', 29, 'noise_sensitivity', true, false,
     null,
     'answer statements that a relevant context supports but the reference does not / answer statements (RAGAS; lower is better)'),
    ('noise_sensitivity(mode=irrelevant)', 30, 'noise_sensitivity', true, false,
     null,
     'answer statements that only an irrelevant context supports and the reference does not / answer statements (RAGAS; lower is better)'),
    ('rubrics_score:default', 31, 'rubrics_score', false, true,
     null,
     'the judge''s 1-5 score by RAGAS''s reference-free default rubric (RAGAS rubrics_score; not scaled)'),
    ('rubrics_score:reference', 32, 'rubrics_score', true, true,
     null,
     'the judge''s 1-5 score by RAGAS''s default rubric with reference (RAGAS rubrics_score; not scaled)'),
    ('non_llm_context_precision_with_reference', 33, null, false, true,
     'string_context_metric',
     'ContextPrecision over the answer''s contexts with rel_i = 1 when the context''s best Levenshtein similarity to a gold text (relevance >= 1) is >= 0.5 (RAGAS NonLLMContextPrecisionWithReference)'),
    ('non_llm_context_recall', 34, null, false, true,
     'string_context_metric',
     'share of the gold texts (relevance >= 1) whose best Levenshtein similarity to a context of the answer is > 0.5 (RAGAS NonLLMContextRecall)')
on conflict (metric) do update
set position = excluded.position, task_kind = excluded.task_kind, needs_reference = excluded.needs_reference,
    higher_is_better = excluded.higher_is_better, computed_by = excluded.computed_by,
    description = excluded.description;
delete from ragsql.generation_metric where position < 0;

-- Each metric's own function, as the registry declares the call (ragsql._evaluate_generation runs it).
create or replace function ragsql._metric_calls()
returns table (names text[], prefix text, call text)
language sql immutable parallel safe
as $$
    select * from (values
        (array['faithfulness'], null, 'ragsql.faithfulness(run, model, prompt_version, partial_weight)'),
        (array['contradiction_rate'], null, 'ragsql.contradiction_rate(run, model, prompt_version)'),
        (array['answer_relevancy'], null, 'ragsql.answer_relevancy(run, model, prompt_version, embedder)'),
        (array['answer_relevancy_rating'], null, 'ragsql.answer_relevancy_rating(run, model, prompt_version)'),
        (array['answer_relevancy_cosine'], null, 'ragsql.answer_relevancy_cosine(run, coalesce(embedder, ragsql._run_embedder(rid, null, model)))'),
        (array['context_precision'], null, 'ragsql.context_precision(run, model, prompt_version)'),
        (array['context_relevance'], null, 'ragsql.context_relevance(run, model, prompt_version)'),
        (array['context_recall'], null, 'ragsql.context_recall(run, model, prompt_version, partial_weight)'),
        (array['answer_similarity'], null, 'ragsql.answer_similarity(run, coalesce(embedder, ragsql._run_embedder(rid, null, model)))'),
        (array['answer_correctness_f1'], null, 'ragsql.answer_correctness_f1(run, model, prompt_version)'),
        (array['answer_correctness'], null, 'ragsql.answer_correctness(run, model, prompt_version, embedder, factual_weight, similarity_weight)'),
        (null, 'aspect:', 'ragsql.aspect_critique(run, substr(metric, length(''aspect:'') + 1), model, prompt_version)'),
        (array['citation_coverage'], null, 'ragsql.citation_coverage(run, model, prompt_version)'),
        (array['citation_validity'], null, 'ragsql.citation_validity(run, model, prompt_version)'),
        (array['exact_match', 'token_f1', 'rouge_l', 'bleu', 'chrf', 'string_presence', 'levenshtein_similarity'], null, 'ragsql.text_metric(run, metric)'),
        (array['id_based_context_precision', 'id_based_context_recall'], null, 'ragsql.context_id_metric(run, metric)'),
        (array['response_groundedness'], null, 'ragsql.response_groundedness(run, model, prompt_version)'),
        (array['nv_context_relevance'], null, 'ragsql.nv_context_relevance(run, model, prompt_version)'),
        (array['context_entity_recall'], null, 'ragsql.context_entity_recall(run, model, prompt_version)'),
        (array['factual_correctness(mode=f1)', 'factual_correctness(mode=precision)', 'factual_correctness(mode=recall)'], null, 'ragsql.factual_correctness(run, substring(metric from ''\(mode=(\w+)\)''), 1.0, null, null, model, prompt_version)'),
        (array['noise_sensitivity(mode=relevant)', 'noise_sensitivity(mode=irrelevant)'], null, 'ragsql.noise_sensitivity(run, substring(metric from ''\(mode=(\w+)\)''), model, prompt_version)'),
        (null, 'rubrics_score:', 'ragsql.rubrics_score(run, substr(metric, length(''rubrics_score:'') + 1), model, prompt_version)'),
        (array['non_llm_context_precision_with_reference', 'non_llm_context_recall'], null, 'ragsql.string_context_metric(run, metric)')
    ) as c(names, prefix, call)
$$;
comment on function ragsql._metric_calls() is
    'The SQL call computing each generation metric, as ragsql/registry.py declares it: for the metrics named, or '
    'for every metric starting with prefix (a family whose members users add).';

create or replace function ragsql._metric_functions()
returns text[]
language sql immutable parallel safe
as $$ select array['faithfulness', 'contradiction_rate', 'answer_relevancy', 'answer_relevancy_rating', 'answer_relevancy_cosine', 'context_precision', 'context_relevance', 'context_recall', 'answer_similarity', 'answer_correctness_f1', 'answer_correctness', 'aspect_critique', 'citation_coverage', 'citation_validity', 'text_metric', 'context_id_metric', 'response_groundedness', 'nv_context_relevance', 'context_entity_recall', 'factual_correctness', 'noise_sensitivity', 'rubrics_score', 'string_context_metric'] $$;
comment on function ragsql._metric_functions() is
    'The functions that compute the generation metrics (ragsql_report wraps each for ragsql_reader).';
