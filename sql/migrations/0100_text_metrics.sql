-- Answer text metrics: computed from the answer and the reference answers alone, right after an import, with
-- no judge (sql/functions/26_text_metrics.sql). They are generation metrics like the others — rows of the one
-- registry — with no judge task kind.

alter table ragsql.generation_metric alter column task_kind drop not null;
comment on column ragsql.generation_metric.task_kind is
    'The judge task kind whose verdicts feed the metric; null for a text metric, computed from the texts alone '
    '(ragsql.text_score).';

insert into ragsql.generation_metric (metric, position, task_kind, needs_reference, description)
values
    ('exact_match', 14, null, true,
     'answer = a reference after normalisation: SQuAD v2 (lower case, punctuation and articles removed) for '
     'space-delimited text, CMRC 2018 (punctuation removed) for Chinese; max over the references'),
    ('token_f1', 15, null, true,
     'bag-of-tokens F1 of answer and reference (SQuAD v2), or F1 of their longest common run of CMRC 2018 '
     'segments (Chinese characters and other tokens); max over the references'),
    ('rouge_l', 16, null, true,
     'ROUGE-L F1 (longest common subsequence of lower-cased alphanumeric tokens, each CJK character a token; '
     'rouge-score without stemming); max over the references'),
    ('bleu', 17, null, true,
     'sentence BLEU of the answer against all its references, as sacrebleu''s sentence_bleu (13a tokens, zh for '
     'Chinese), in [0, 1]'),
    ('chrf', 18, null, true, 'sentence chrF (character 6-grams, beta 2) as sacrebleu''s sentence_chrf, in [0, 1]; '
     'max over the references'),
    ('string_presence', 19, null, true, '1 when a reference appears verbatim in the answer, else 0 (RAGAS)'),
    ('levenshtein_similarity', 20, null, true,
     '1 - Levenshtein distance / length of the longer text (RAGAS NonLLMStringSimilarity); max over the references')
on conflict (metric) do nothing;

insert into ragsql.schema_migration (name) values ('0100_text_metrics') on conflict do nothing;
