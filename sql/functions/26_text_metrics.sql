-- Metrics with no judge (the rows of ragsql.generation_metric with computed_by set): an answer against its
-- reference answers (text_metric), and the ids of the answer's contexts against the gold ids (context_id_metric).
-- Each is available as soon as a run's answers and the dataset's references or gold labels are stored; a text
-- metric's value is the best over the query's references. No answer, an empty answer, no reference, no context or
-- no gold id gives null and a reason, never 0.
--
-- Tokenisations, each as its source computes it:
--   SQuAD v2 (exact_match, token_f1 of space-delimited text): lower case, ASCII punctuation removed, the
--     articles a / an / the removed, whitespace-split.
--   CMRC 2018 (exact_match, token_f1 when the query is Chinese): lower case, its punctuation list removed,
--     every CJK character a segment and other runs split into words, numbers and symbols (the official
--     script calls nltk.word_tokenize there; numbers keep their decimal point, as it does).
--   rouge-score (rouge_l): lower case, runs of [a-z0-9] (no stemming); each CJK character is a token too
--     (rouge-score's default tokenizer drops them, which would score every Chinese answer 0).
--   sacrebleu (bleu): its 13a tokenizer, or its zh tokenizer for a Chinese query; chrf: characters without
--     whitespace.

create or replace function ragsql.squad_tokens(content text)
returns text[]
language sql immutable parallel safe
as $$
    -- normalize_answer of the SQuAD v2 evaluation script, then split
    select coalesce(regexp_split_to_array(nullif(btrim(regexp_replace(
               regexp_replace(translate(lower(content), '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', ''),
                              '\y(a|an|the)\y', ' ', 'g'),
               '\s+', ' ', 'g')), ''), ' '), '{}')
$$;
comment on function ragsql.squad_tokens(text) is
    'SQuAD v2''s normalize_answer split into tokens: lower case, ASCII punctuation and articles (a, an, the) '
    'removed, whitespace collapsed.';

create or replace function ragsql.bag_f1(predicted text[], gold text[])
returns float8
language sql immutable parallel safe
as $$
    select case
        when cardinality(predicted) = 0 or cardinality(gold) = 0 then (predicted = gold)::integer::float8
        else (select case when common = 0 then 0 else 2.0 * common / (cardinality(predicted) + cardinality(gold)) end
              from (select coalesce(sum(least(p.n, g.n)), 0) as common
                    from (select t, count(*) as n from unnest(predicted) as t group by t) as p
                    join (select t, count(*) as n from unnest(gold) as t group by t) as g using (t)) as c)
    end
$$;
comment on function ragsql.bag_f1(text[], text[]) is
    'F1 of two token bags (SQuAD v2 compute_f1): 2 * shared / (|predicted| + |gold|), shared counting repeats; '
    '1 if both are empty, 0 if one is.';

create or replace function ragsql.cmrc_punctuation()
returns text
language sql immutable parallel safe
as $$
    select '-:_*^/\~`+=，。：？！“”；’《》·、「」（）－～『』'
$$;
comment on function ragsql.cmrc_punctuation() is
    'The characters CMRC 2018''s evaluation removes (its sp_char list; its two-character "……" matches no single '
    'character, so "…" stays).';

create or replace function ragsql.cmrc_segments(content text)
returns text[]
language plpgsql immutable parallel safe
as $$
-- mixed_segmentation(rm_punc=True) of the CMRC 2018 evaluation script
declare
    segments text[] := '{}';
    pending text := '';
    ch text;
begin
    foreach ch in array regexp_split_to_array(regexp_replace(lower(coalesce(content, '')), '^\s+|\s+$', '', 'g'), '')
    loop
        continue when strpos(ragsql.cmrc_punctuation(), ch) > 0;
        if ch ~ '[\u4e00-\u9fa5]' then
            segments := segments || ragsql._word_tokens(pending) || ch;
            pending := '';
        else
            pending := pending || ch;
        end if;
    end loop;
    return segments || ragsql._word_tokens(pending);
end
$$;
comment on function ragsql.cmrc_segments(text) is
    'CMRC 2018''s mixed segmentation without punctuation: each Chinese character a segment, other runs split into '
    'words, numbers (with their decimal point) and symbols.';

create or replace function ragsql._word_tokens(content text)
returns text[]
language sql immutable parallel safe
as $$
    select coalesce(array_agg(m[1] order by n), '{}')
    from regexp_matches(content, '([0-9]+(?:[.,][0-9]+)+|[a-z0-9_\u00c0-\u024f]+(?:''[a-z0-9\u00c0-\u024f]+)?|'
                                 '[^a-z0-9_\u00c0-\u024f[:space:]])', 'g') with ordinality as x(m, n)
$$;
comment on function ragsql._word_tokens(text) is
    'Words (lower-case Latin letters, digits, _; an apostrophe inside), numbers (with their decimal point) and '
    'single other symbols of a lower-cased text, in order.';

create or replace function ragsql.longest_common(a text[], b text[], contiguous boolean)
returns integer
language plpgsql immutable parallel safe
as $$
-- dynamic programming over the two sequences, one row at a time
declare
    prev integer[] := array_fill(0, array[cardinality(b) + 1]);
    cur integer[];
    best integer := 0;
begin
    for i in 1 .. cardinality(a) loop
        cur := array_fill(0, array[cardinality(b) + 1]);
        for j in 1 .. cardinality(b) loop
            if a[i] = b[j] then
                cur[j + 1] := prev[j] + 1;
            elsif not contiguous then
                cur[j + 1] := greatest(prev[j + 1], cur[j]);
            end if;
            best := greatest(best, cur[j + 1]);
        end loop;
        prev := cur;
    end loop;
    return best;
end
$$;
comment on function ragsql.longest_common(text[], text[], boolean) is
    'Length of the longest common contiguous run (contiguous: CMRC 2018''s find_lcs) or subsequence (ROUGE-L''s '
    'LCS) of two token sequences.';

create or replace function ragsql.rouge_tokens(content text)
returns text[]
language sql immutable parallel safe
as $$
    select coalesce(array_agg(m[1] order by n), '{}')
    from regexp_matches(lower(content), '([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+)', 'g') with ordinality as x(m, n)
$$;
comment on function ragsql.rouge_tokens(text) is
    'rouge-score''s tokens without stemming (lower-cased runs of a-z and 0-9), each CJK character a token too.';

create or replace function ragsql.levenshtein_distance(a text, b text)
returns integer
language plpgsql immutable parallel safe
as $$
declare
    x text[] := regexp_split_to_array(a, '');
    y text[] := regexp_split_to_array(b, '');
    prev integer[];
    cur integer[];
begin
    if a = '' or b = '' then
        return greatest(length(a), length(b));
    end if;
    prev := array(select generate_series(0, cardinality(y)));
    cur := prev;
    for i in 1 .. cardinality(x) loop
        cur[1] := i;
        for j in 1 .. cardinality(y) loop
            cur[j + 1] := least(prev[j + 1] + 1, cur[j] + 1, prev[j] + (x[i] <> y[j])::integer);
        end loop;
        prev := cur;
    end loop;
    return prev[cardinality(y) + 1];
end
$$;
comment on function ragsql.levenshtein_distance(text, text) is
    'Character edits (insert, delete, substitute) turning one text into the other; no length limit (unlike '
    'fuzzystrmatch''s 255 characters), time proportional to the product of the lengths.';

create or replace function ragsql.bleu_tokens(content text, chinese boolean)
returns text[]
language plpgsql immutable parallel safe
as $$
-- sacrebleu's tokenizers: 13a (mteval-v13a), or zh (each Chinese character apart, then 13a's rules)
declare
    line text := regexp_replace(content, '\s+$', '');  -- sacrebleu rstrips a segment before tokenizing
begin
    if chinese then
        -- the characters sacrebleu's zh tokenizer takes for Chinese (its range table as Python compares it)
        line := regexp_replace(btrim(line, E' \t\n\r\f\v'),
            '([\u2001-\u2a6d\u2e80-\u2fdf\u2ff0-\u303f\u3100-\u312f\u31a0-\u31ef\u3200-\u4db5\u4e00-\u9fbb'
            '\uf900-\ufa2d\ufa30-\ufa6a\ufa70-\ufad9\ufe10-\ufe1f\ufe30-\ufe4f\uff00-\uffef])', ' \1 ', 'g');
    else
        line := replace(replace(replace(line, '<skipped>', ''), E'-\n', ''), E'\n', ' ');
        line := ' ' || replace(replace(replace(replace(line, '&quot;', '"'), '&amp;', '&'), '&lt;', '<'), '&gt;', '>')
                || ' ';
    end if;
    line := regexp_replace(line, '([\x7b-\x7e\x5b-\x60\x20-\x26\x28-\x2b\x3a-\x40\x2f])', ' \1 ', 'g');
    line := regexp_replace(line, '([^0-9])([.,])', '\1 \2 ', 'g');  -- period and comma unless after a digit
    line := regexp_replace(line, '([.,])([^0-9])', ' \1 \2', 'g');  -- … or before one
    line := regexp_replace(line, '([0-9])(-)', '\1 \2 ', 'g');  -- a dash after a digit
    return coalesce(regexp_split_to_array(nullif(btrim(regexp_replace(line, '\s+', ' ', 'g')), ''), ' '), '{}');
end
$$;
comment on function ragsql.bleu_tokens(text, boolean) is
    'A segment tokenized as sacrebleu''s 13a tokenizer does (mteval-v13a), or its zh tokenizer when chinese.';

create or replace function ragsql.bleu(answer text, references_ text[], chinese boolean)
returns float8
language plpgsql immutable parallel safe
as $$
-- sacrebleu's sentence_bleu with its defaults (4-grams, exp smoothing, effective order), scaled to [0, 1]
declare
    hyp text[] := ragsql.bleu_tokens(answer, chinese);
    correct integer[];
    total integer[];
    ref_len integer;
    bp float8;
    smooth float8 := 1;
    order_used integer := 4;
    log_sum float8 := 0;
begin
    -- every reference tokenized once; an n-gram is clipped by the reference that has it most often
    with ref as materialized (
        select u.k, ragsql.bleu_tokens(u.t, chinese) as toks
        from unnest(references_) with ordinality as u(t, k)
    ),
    ref_counts as (
        select x.n, x.g, max(x.c) as c
        from (select n.n, array_to_string(ref.toks[i:i + n.n - 1], ' ') as g, ref.k, count(*) as c
              from ref, generate_series(1, 4) as n(n), generate_series(1, cardinality(ref.toks) - n.n + 1) as i
              group by 1, 2, 3) as x
        group by x.n, x.g
    ),
    hyp_counts as (
        select n.n, array_to_string(hyp[i:i + n.n - 1], ' ') as g, count(*) as c
        from generate_series(1, 4) as n(n), generate_series(1, cardinality(hyp) - n.n + 1) as i
        group by 1, 2
    )
    select array_agg(coalesce(m.correct, 0) order by m.n), array_agg(greatest(cardinality(hyp) - m.n + 1, 0) order by m.n),
           -- the reference length closest to the answer's (the shorter on a tie)
           (select cardinality(ref.toks) from ref order by abs(cardinality(hyp) - cardinality(ref.toks)),
                                                           cardinality(ref.toks) limit 1)
      into correct, total, ref_len
    from (select n.n, (select sum(least(h.c, coalesce(r.c, 0))) from hyp_counts as h
                       left join ref_counts as r on r.n = h.n and r.g = h.g where h.n = n.n) as correct
          from generate_series(1, 4) as n(n)) as m;
    if cardinality(hyp) = 0 or coalesce(correct[1], 0) + coalesce(correct[2], 0) + coalesce(correct[3], 0)
                                + coalesce(correct[4], 0) = 0 then
        return 0;
    end if;
    bp := case when cardinality(hyp) < ref_len then exp(1 - ref_len::float8 / cardinality(hyp)) else 1 end;
    for n in 1 .. 4 loop
        exit when total[n] = 0;
        order_used := n;
        if correct[n] = 0 then
            smooth := smooth * 2;
            log_sum := log_sum + ln(1 / (smooth * total[n]));
        else
            log_sum := log_sum + ln(correct[n]::float8 / total[n]);
        end if;
    end loop;
    return bp * exp(log_sum / order_used);
end
$$;
comment on function ragsql.bleu(text, text[], boolean) is
    'Sentence BLEU as sacrebleu''s sentence_bleu computes it by default (13a or, for Chinese, zh tokens; n-grams '
    'up to 4 clipped by the references'' most frequent count; the closest reference length; exp smoothing; '
    'effective order), scaled to [0, 1].';

create or replace function ragsql.chrf(answer text, reference text)
returns float8
language sql immutable parallel safe
as $$
    -- sacrebleu's sentence_chrf with its defaults (character 6-grams, no word n-grams, beta 2, whitespace removed):
    -- precision and recall averaged over the orders both texts have, then F-beta
    with t as (select regexp_replace(answer, '\s', '', 'g') as h, regexp_replace(reference, '\s', '', 'g') as r),
    grams as (
        select n.n, 'h' as side, substr(t.h, i, n.n) as g
        from t, generate_series(1, 6) as n(n), generate_series(1, length(t.h) - n.n + 1) as i
        union all
        select n.n, 'r', substr(t.r, i, n.n)
        from t, generate_series(1, 6) as n(n), generate_series(1, length(t.r) - n.n + 1) as i
    ),
    per_order as (
        select c.n, sum(c.hc) as n_hyp, sum(c.rc) as n_ref, sum(least(c.hc, c.rc)) as n_match
        from (select n, g, count(*) filter (where side = 'h') as hc, count(*) filter (where side = 'r') as rc
              from grams group by n, g) as c
        group by c.n
        having sum(c.hc) > 0 and sum(c.rc) > 0
    ),
    averaged as (select avg(n_match::float8 / n_hyp) as p, avg(n_match::float8 / n_ref) as r from per_order)
    select case when coalesce(p + r, 0) = 0 then 0 else 5 * p * r / (4 * p + r) end from averaged
$$;
comment on function ragsql.chrf(text, text) is
    'Sentence chrF as sacrebleu''s sentence_chrf computes it by default (character n-grams 1..6 without '
    'whitespace, precision and recall averaged over the orders both texts have, F-beta with beta 2), in [0, 1].';

drop function if exists ragsql.text_score(text, text, text, text);  -- one reference at a time, before BLEU
create or replace function ragsql.text_score(metric text, answer text, references_ text[], language text)
returns float8
language plpgsql immutable parallel safe
as $$
-- One text metric of an answer against its references: the best over them, except BLEU, which reads them all
-- at once as sacrebleu does. language 'zh…' selects CMRC 2018 for exact_match and token_f1 and sacrebleu's zh
-- tokenizer for bleu. The one place a text metric is computed: a new one is a branch here and a row of
-- ragsql.generation_metric.
declare
    chinese constant boolean := coalesce(language, '') like 'zh%';
    best float8;
    pred text[];
    gold text[];
    shared integer;
    value float8;
    reference text;
begin
    if answer is null or coalesce(cardinality(references_), 0) = 0 then
        return null;
    elsif metric = 'bleu' then
        return ragsql.bleu(answer, references_, chinese);
    end if;
    foreach reference in array references_ loop
        case metric
        when 'exact_match' then
            if chinese then
                value := (translate(regexp_replace(lower(answer), '^\s+|\s+$', '', 'g'), ragsql.cmrc_punctuation(), '')
                          = translate(regexp_replace(lower(reference), '^\s+|\s+$', '', 'g'), ragsql.cmrc_punctuation(), ''))
                         ::integer;
            else
                value := (ragsql.squad_tokens(answer) = ragsql.squad_tokens(reference))::integer;
            end if;
        when 'token_f1' then
            if chinese then
                pred := ragsql.cmrc_segments(answer);
                gold := ragsql.cmrc_segments(reference);
                shared := ragsql.longest_common(gold, pred, true);
                value := case when shared = 0 then 0 else 2.0 * shared / (cardinality(pred) + cardinality(gold)) end;
            else
                value := ragsql.bag_f1(ragsql.squad_tokens(answer), ragsql.squad_tokens(reference));
            end if;
        when 'rouge_l' then
            pred := ragsql.rouge_tokens(answer);
            gold := ragsql.rouge_tokens(reference);
            shared := ragsql.longest_common(gold, pred, false);
            value := case when shared = 0 then 0 else 2.0 * shared / (cardinality(pred) + cardinality(gold)) end;
        when 'chrf' then
            value := ragsql.chrf(answer, reference);
        when 'string_presence' then
            value := (strpos(answer, reference) > 0)::integer;
        when 'levenshtein_similarity' then
            value := 1 - ragsql.levenshtein_distance(answer, reference)::float8
                         / greatest(length(answer), length(reference), 1);
        else
            raise exception 'no text metric "%"', metric
                using errcode = 'invalid_parameter_value',
                      hint = 'see: select metric from ragsql.generation_metric where computed_by = ''text_metric''';
        end case;
        best := greatest(best, value);
    end loop;
    return best;
end
$$;
comment on function ragsql.text_score(text, text, text[], text) is
    'A text metric (exact_match, token_f1, rouge_l, bleu, chrf, string_presence, levenshtein_similarity) of an '
    'answer against its references: the best over them (BLEU: sacrebleu''s multi-reference sentence BLEU); '
    'language ''zh…'' computes exact_match and token_f1 as CMRC 2018 and tokenizes BLEU as sacrebleu''s zh; null '
    'without a reference.';

create or replace function ragsql.text_metric(run text, metric text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    -- looked up first: the query below names the run id on its run-scoped table (one shard on Citus)
    rid constant bigint := ragsql._run_id(text_metric.run);
begin
    return query
    select q.qid,
           s.best,
           case when a.query_id is null then 'no answer'
                when btrim(a.text) = '' then 'empty answer'
                when r.refs is null then 'no reference answer' end,
           null::text, null::text, null::text,
           case when s.best is not null then jsonb_build_object('references', cardinality(r.refs), 'language', s.lang) end
    from ragsql.run as ru
    join ragsql.query as q on q.dataset_id = ru.dataset_id
    left join ragsql.answer as a on a.run_id = rid and a.query_id = q.id
    cross join lateral (select array_agg(ra.text order by ra.position) as refs
                        from ragsql.reference_answer as ra where ra.query_id = q.id) as r
    left join lateral (
        select ragsql.text_score(text_metric.metric, a.text, r.refs, l.lang) as best, l.lang
        from (select coalesce(q.language, case when a.text || array_to_string(r.refs, ' ') ~ '[\u4e00-\u9fff]'
                                               then 'zh' else 'en' end) as lang) as l
        where btrim(a.text) <> '' and r.refs is not null
    ) as s on true
    where ru.id = rid;
end
$$;
comment on function ragsql.text_metric(text, text) is
    'Per-query value of a text metric of a run (rows of ragsql.generation_metric computed_by text_metric): the best over '
    'the query''s reference answers, in the query''s language (else zh when the texts hold Chinese); null with a '
    'reason when there is no answer, the answer is empty or the query has no reference.';

create or replace function ragsql.context_id_metric(run text, metric text)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
-- RAGAS's IDBasedContextPrecision / IDBasedContextRecall: the distinct ids of the contexts the answer used
-- against the query's gold ids (relevance >= 1; for a run retrieved by ragsql from a corpus version, the gold
-- evidence mapped onto that version's chunks, as the retrieval measures read it).
declare
    rid constant bigint := ragsql._run_id(run);
    gold_query bigint[];
    gold_docno text[];
begin
    if metric not in ('id_based_context_precision', 'id_based_context_recall') then
        raise exception 'no context id metric "%"', metric
            using errcode = 'invalid_parameter_value',
                  hint = 'see: select metric from ragsql.generation_metric where computed_by = ''context_id_metric''';
    end if;
    -- the gold ids first (ragsql.run_judgments reads other tables): the query below then reads only the run's
    -- contexts, one shard on Citus
    select coalesce(array_agg(g.query_id), '{}'), coalesce(array_agg(g.docno), '{}') into gold_query, gold_docno
    from (select distinct j.query_id, j.docno from ragsql.run_judgments(rid) as j where j.relevance >= 1) as g;
    return query
    with gold as (
        select g.query_id, g.docno from unnest(gold_query, gold_docno) as g(query_id, docno)
    ),
    used as (
        select distinct c.query_id, c.docno from ragsql.answer_context as c where c.run_id = rid
    ),
    counts as (
        select q.id, q.qid,
               (select count(*) from used as u where u.query_id = q.id) as retrieved,
               (select count(*) from gold as g where g.query_id = q.id) as reference,
               (select count(*) from used as u join gold as g using (query_id, docno) where u.query_id = q.id) as hits
        from ragsql.run as ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        where ru.id = rid
    )
    select c.qid,
           case when c.retrieved = 0 or c.reference = 0 then null
                when metric = 'id_based_context_precision' then c.hits::float8 / c.retrieved
                else c.hits::float8 / c.reference end,
           case when c.retrieved = 0 then 'no retrieved contexts'
                when c.reference = 0 then 'no reference context ids' end,
           null::text, null::text, null::text,
           case when c.retrieved > 0 and c.reference > 0
                then jsonb_build_object('retrieved', c.retrieved, 'reference', c.reference, 'hits', c.hits) end
    from counts as c;
end
$$;
comment on function ragsql.context_id_metric(text, text) is
    'RAGAS''s id_based_context_precision (gold ids among the answer''s distinct context ids / those ids) and '
    'id_based_context_recall (the same / the query''s gold ids, relevance >= 1), per query of a run; null with a '
    'reason when the answer used no context or the query has no gold id.';
