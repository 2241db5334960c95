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
-- Lower case, whitespace and \w are Python's everywhere (ragsql.python_lower and the tables of 15_python_text.sql),
-- never the server's lower(), \s or \y, which follow the database's collation: a value is the same bits on a
-- database created with the "C" collation.

create or replace function ragsql.python_lower(content text)
returns text
language sql immutable parallel safe
as $$
    -- ASCII by lower() under "C" (which knows nothing else), the rest by Python's table: no server collation read
    select case
        when content !~ ('[' || ragsql._py_text('upper_class') || ']') then lower(content collate "C")
        else translate(
            lower(replace(
                case when strpos(content, U&'\03A3') = 0 then content
                     -- Final_Sigma: after a cased letter (case-ignorables between), not before one
                     else regexp_replace(content,
                         '(?<=[' || ragsql._py_text('cased_class') || ']['
                         || ragsql._py_text('case_ignorable_class') || ']*)'
                         || U&'\03A3' || '(?![' || ragsql._py_text('case_ignorable_class') || ']*['
                         || ragsql._py_text('cased_class') || '])',
                         U&'\03C2', 'g')
                end,
                U&'\0130', U&'i\0307') collate "C"),
            ragsql._py_text('upper_chars'), ragsql._py_text('lower_chars'))
    end
$$;
comment on function ragsql.python_lower(text) is
    'Python''s str.lower() (full case mapping: U+0130 to i + U+0307, final sigma to U+03C2) from explicit tables '
    '(sql/functions/15_python_text.sql, Unicode of the Python that generated them), the same under every server '
    'collation; PostgreSQL''s lower() follows the collation (ASCII only under "C") and maps U+0130 and final sigma '
    'otherwise. Checked equal to Python on every code point (one at a time, and with sigma in context); a '
    'character newer than the tables'' Unicode version is left as it is.';

create or replace function ragsql._py_strip(content text)
returns text
language sql immutable parallel safe
as $$
    select regexp_replace(content,
                          '^[' || ragsql._py_text('space_class') || ']+|[' || ragsql._py_text('space_class') || ']+$',
                          '', 'g')
$$;
comment on function ragsql._py_strip(text) is 'Python''s str.strip(): every str.isspace() character cut at both ends.';

create or replace function ragsql._py_split(content text)
returns text[]
language sql immutable parallel safe
as $$
    select coalesce(regexp_split_to_array(nullif(ragsql._py_strip(content), ''),
                                          '[' || ragsql._py_text('space_class') || ']+'), '{}')
$$;
comment on function ragsql._py_split(text) is
    'Python''s str.split(): the words between runs of str.isspace() characters (none for a blank text).';

create or replace function ragsql.squad_tokens(content text)
returns text[]
language sql immutable parallel safe
as $$
    -- normalize_answer of the SQuAD evaluation script (v1.1 and v2 alike), then split: Python's lower, ASCII
    -- punctuation removed, the articles removed where re's \b(a|an|the)\b finds them (\w as Python's), split
    -- on Python's whitespace; no server collation read
    select ragsql._py_split(regexp_replace(
               translate(ragsql.python_lower(content), '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', ''),
               '(?<![' || ragsql._py_text('word_class') || '])(a|an|the)(?![' || ragsql._py_text('word_class') || '])',
               ' ', 'g'))
$$;
comment on function ragsql.squad_tokens(text) is
    'SQuAD''s normalize_answer split into tokens, as Python computes it under every server collation: '
    'ragsql.python_lower, ASCII punctuation (string.punctuation) removed, the articles a, an, the removed where '
    're''s \b finds them (\w: str.isalnum() or _), split on str.isspace() characters.';

create or replace function ragsql._f_measure(shared bigint, predicted bigint, gold bigint)
returns float8
language sql immutable parallel safe
as $$
    -- in the reference scripts' float steps (precision, recall, 2 * p * r / (p + r)), so the bits are theirs
    select case when shared = 0 then 0::float8
                else 2 * (shared::float8 / predicted) * (shared::float8 / gold)
                     / ((shared::float8 / predicted) + (shared::float8 / gold)) end
$$;
comment on function ragsql._f_measure(bigint, bigint, bigint) is
    'F1 of SHARED items of PREDICTED and GOLD: 2 * p * r / (p + r), p = shared / predicted, r = shared / gold, '
    'computed as SQuAD, CMRC 2018 and rouge-score do (0 when nothing is shared).';

create or replace function ragsql.bag_f1(predicted text[], gold text[])
returns float8
language sql immutable parallel safe
as $$
    select case
        when cardinality(predicted) = 0 or cardinality(gold) = 0 then (predicted = gold)::integer::float8
        else (select ragsql._f_measure(common, cardinality(predicted), cardinality(gold))
              from (select coalesce(sum(least(p.n, g.n)), 0)::bigint as common
                    from (select t, count(*) as n from unnest(predicted) as t group by t) as p
                    join (select t, count(*) as n from unnest(gold) as t group by t) as g using (t)) as c)
    end
$$;
comment on function ragsql.bag_f1(text[], text[]) is
    'F1 of two token bags (SQuAD v2 compute_f1): 2 * p * r / (p + r), p = shared / |predicted|, '
    'r = shared / |gold|, shared counting repeats; '
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
    foreach ch in array regexp_split_to_array(ragsql._py_strip(ragsql.python_lower(coalesce(content, ''))), '')
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
                                 '[^a-z0-9_\u00c0-\u024f' || ragsql._py_text('space_class') || '])', 'g')
         with ordinality as x(m, n)
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
    from regexp_matches(ragsql.python_lower(content), '([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[a-z0-9]+)', 'g')
         with ordinality as x(m, n)
$$;
comment on function ragsql.rouge_tokens(text) is
    'rouge-score''s tokens without stemming (lower-cased runs of a-z and 0-9), each CJK character a token too.';

create or replace function ragsql.levenshtein_distance(a text, b text)
returns integer
language plpgsql immutable parallel safe strict
as $$
-- Hyyrö's bit-parallel Levenshtein (2003), in blocks of 62 bits held in bigints: each block's sum then stays below
-- 2^63, and ~, + and << are masked back to 62 bits (uint64 arithmetic wraps; bigint would overflow). The pattern
-- is the shorter text; the longer one is read as the indexes of its characters among the pattern's (a character
-- the pattern lacks gets the index of an all-zero row).
declare
    w constant integer := 62;
    mask constant bigint := 4611686018427387903;  -- 2^62 - 1
    p text;
    t text;
    m integer;
    words integer;
    chars text[];
    pm bigint[];
    ids integer[];
    vp bigint[];
    vn bigint[];
    last bigint;
    dist integer;
    c integer;
    at integer;
    x bigint;
    d0 bigint;
    hp bigint;
    hn bigint;
    hp_carry bigint;
    hn_carry bigint;
    v_p bigint;
    v_n bigint;
    lo integer;
    hi integer;
    mid integer;
begin
    if length(a) <= length(b) then p := a; t := b; else p := b; t := a; end if;
    -- a common prefix and suffix cost nothing: found by binary search with string comparisons, then cut
    lo := 0;
    hi := length(p);
    while lo < hi loop
        mid := (lo + hi + 1) / 2;
        if left(p, mid) = left(t, mid) then lo := mid; else hi := mid - 1; end if;
    end loop;
    p := substr(p, lo + 1);
    t := substr(t, lo + 1);
    lo := 0;
    hi := length(p);
    while lo < hi loop
        mid := (lo + hi + 1) / 2;
        if right(p, mid) = right(t, mid) then lo := mid; else hi := mid - 1; end if;
    end loop;
    p := left(p, length(p) - lo);
    t := left(t, length(t) - lo);
    m := length(p);
    if m = 0 then
        return length(t);
    end if;
    words := (m + w - 1) / w;
    -- the pattern's distinct characters, and per character and block the bits of the positions holding it
    select array_agg(ch order by first) into chars
    from (select ch, min(n) as first
          from unnest(string_to_array(p, null)) with ordinality as u(ch, n)
          group by ch) as d;
    pm := array_fill(0::bigint, array[(cardinality(chars) + 1) * words]);
    for c, at, x in
        select array_position(chars, u.ch), (u.n - 1) / w, bit_or(1::bigint << ((u.n - 1) % w)::integer)
        from unnest(string_to_array(p, null)) with ordinality as u(ch, n)
        group by 1, 2
    loop
        pm[(c - 1) * words + at + 1] := x;
    end loop;
    select array_agg(coalesce(array_position(chars, u.ch), cardinality(chars) + 1) order by u.n) into ids
    from unnest(string_to_array(t, null)) with ordinality as u(ch, n);
    last := 1::bigint << ((m - 1) % w);
    dist := m;
    if words = 1 then
        v_p := (1::bigint << m) - 1;  -- m <= 62: fits
        v_n := 0;
        foreach c in array ids loop
            x := pm[c];
            d0 := ((((x & v_p) + v_p) & mask) # v_p) | x | v_n;
            hp := v_n | (~(d0 | v_p) & mask);
            hn := d0 & v_p;
            dist := dist + (hp & last <> 0)::integer - (hn & last <> 0)::integer;
            hp := ((hp << 1) & mask) | 1;
            hn := (hn << 1) & mask;
            v_p := hn | (~(d0 | hp) & mask);
            v_n := hp & d0;
        end loop;
        return dist;
    end if;
    vp := array_fill(mask, array[words]);
    vn := array_fill(0::bigint, array[words]);
    foreach c in array ids loop
        hp_carry := 1;
        hn_carry := 0;
        at := (c - 1) * words;
        for blk in 1 .. words loop
            x := pm[at + blk] | hn_carry;
            v_p := vp[blk];
            v_n := vn[blk];
            d0 := ((((x & v_p) + v_p) & mask) # v_p) | x | v_n;
            hp := v_n | (~(d0 | v_p) & mask);
            hn := d0 & v_p;
            -- the block shifted up by one, the lower block's top bit coming in
            vp[blk] := ((hn << 1) & mask) | hn_carry | (~(d0 | ((hp << 1) & mask) | hp_carry) & mask);
            vn[blk] := (((hp << 1) & mask) | hp_carry) & d0;
            hp_carry := hp >> (w - 1);
            hn_carry := hn >> (w - 1);
        end loop;
        -- the last row's horizontal delta, read at the pattern's last position
        dist := dist + (hp & last <> 0)::integer - (hn & last <> 0)::integer;
    end loop;
    return dist;
end
$$;
comment on function ragsql.levenshtein_distance(text, text) is
    'Character edits (insert, delete, substitute) turning one text into the other, as rapidfuzz''s '
    'Levenshtein.distance: Hyyrö''s bit-parallel algorithm, time proportional to the longer length times '
    'ceil(shorter length / 62); no length limit (unlike fuzzystrmatch''s 255 characters). Null when a text is null.';

create or replace function ragsql.bleu_tokens(content text, chinese boolean)
returns text[]
language plpgsql immutable parallel safe
as $$
-- sacrebleu's tokenizers: 13a (mteval-v13a), or zh (each Chinese character apart, then 13a's rules)
declare
    -- sacrebleu rstrips a segment before tokenizing (Python's whitespace, not the collation's \s)
    line text := regexp_replace(content, '[' || ragsql._py_text('space_class') || ']+$', '');
begin
    if chinese then
        -- the characters sacrebleu's zh tokenizer takes for Chinese (its range table as Python compares it)
        line := regexp_replace(ragsql._py_strip(line),
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
    return ragsql._py_split(line);
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
    with t as (select regexp_replace(answer, '[' || ragsql._py_text('space_class') || ']', '', 'g') as h,
                      regexp_replace(reference, '[' || ragsql._py_text('space_class') || ']', '', 'g') as r),
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
    -- in order of n, as sacrebleu sums them: a float mean in plan order can change in the last bit
    averaged as (select avg(n_match::float8 / n_hyp order by n) as p, avg(n_match::float8 / n_ref order by n) as r
                 from per_order)
    select case when coalesce(p + r, 0) = 0 then 0 else 5 * p * r / (4 * p + r) end from averaged
$$;
comment on function ragsql.chrf(text, text) is
    'Sentence chrF as sacrebleu''s sentence_chrf computes it by default (character n-grams 1..6 without '
    'whitespace, precision and recall averaged over the orders both texts have, F-beta with beta 2), in [0, 1].';

drop function if exists ragsql.text_score(text, text, text, text);  -- one reference at a time, before BLEU
create or replace function ragsql._check_computed_by(metric text, computed_by text, what text)
returns void
language plpgsql stable parallel safe
as $$
begin
    -- the metrics a function computes are the registry's rows that name it (ragsql.generation_metric)
    if not exists (select from ragsql.generation_metric as m
                   where m.metric = _check_computed_by.metric and m.computed_by = _check_computed_by.computed_by) then
        raise exception 'no % metric "%"', what, metric
            using errcode = 'invalid_parameter_value',
                  hint = format('see: select metric from ragsql.generation_metric where computed_by = %L', computed_by);
    end if;
end
$$;
comment on function ragsql._check_computed_by(text, text, text) is
    'Raises invalid_parameter_value unless metric is a row of ragsql.generation_metric computed_by that function.';

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
                value := (translate(ragsql._py_strip(ragsql.python_lower(answer)), ragsql.cmrc_punctuation(), '')
                          = translate(ragsql._py_strip(ragsql.python_lower(reference)), ragsql.cmrc_punctuation(), ''))
                         ::integer;
            else
                value := (ragsql.squad_tokens(answer) = ragsql.squad_tokens(reference))::integer;
            end if;
        when 'token_f1' then
            if chinese then
                pred := ragsql.cmrc_segments(answer);
                gold := ragsql.cmrc_segments(reference);
                shared := ragsql.longest_common(gold, pred, true);
                value := ragsql._f_measure(shared, cardinality(pred), cardinality(gold));
            else
                value := ragsql.bag_f1(ragsql.squad_tokens(answer), ragsql.squad_tokens(reference));
            end if;
        when 'rouge_l' then
            pred := ragsql.rouge_tokens(answer);
            gold := ragsql.rouge_tokens(reference);
            shared := ragsql.longest_common(gold, pred, false);
            value := ragsql._f_measure(shared, cardinality(pred), cardinality(gold));
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
           case when a.query_id is null or a.text is null then 'no answer'
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
    perform ragsql._check_computed_by(metric, 'context_id_metric', 'context id');
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
    'reason when the answer used no context or the query has no gold id (RAGAS: NaN when its denominator is empty, '
    '0 when the other list is: ragsql does not score an empty list 0).';

create or replace function ragsql.levenshtein_similarity(a text, b text)
returns float8
language sql immutable parallel safe strict
as $$
    select case when a = '' and b = '' then 1
                else 1 - ragsql.levenshtein_distance(a, b)::float8 / greatest(length(a), length(b))
           end
$$;
comment on function ragsql.levenshtein_similarity(text, text) is
    '1 - Levenshtein distance / length of the longer text (1 for two empty texts): RAGAS''s NonLLMStringSimilarity, '
    'rapidfuzz''s 1 - Levenshtein.normalized_distance.';

create or replace function ragsql.string_context_metric(run text, metric text, threshold float8 default 0.5)
returns table (
    qid text, value float8, reason text, judge_model text, judge_prompt_version text, judge_embedder text,
    detail jsonb)
language plpgsql stable parallel safe
as $$
-- RAGAS's NonLLMContextPrecisionWithReference and NonLLMContextRecall: the texts of the answer's contexts (in prompt
-- order) against the query's gold texts (judgments with relevance >= 1 and a text: RAGAS's reference_contexts).
declare
    rid constant bigint := ragsql._run_id(run);
begin
    perform ragsql._check_computed_by(metric, 'string_context_metric', 'string context');
    if threshold is null or threshold < 0 or threshold > 1 or threshold = 'NaN'::float8 then
        raise exception 'threshold must be between 0 and 1, got %', threshold
            using errcode = 'invalid_parameter_value', hint = 'RAGAS''s default: 0.5';
    end if;
    return query
    with contexts as materialized (
        select c.query_id, c.position, c.text from ragsql.answer_context as c where c.run_id = rid
    ),
    retrieved as materialized (
        -- a context given by id alone (null text) has no text to compare
        select c.query_id, c.position, c.text from contexts as c where c.text is not null
    ),
    gold as materialized (
        select j.query_id, j.docno, j.text
        from ragsql.run as ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        join ragsql.judgment as j on j.query_id = q.id
        where ru.id = rid and j.relevance >= 1 and j.text is not null
    ),
    pair as materialized (
        select r.query_id, r.position, g.docno, ragsql.levenshtein_similarity(r.text, g.text) as similarity
        from retrieved as r
        join gold as g on g.query_id = r.query_id
    ),
    per_context as (
        -- RAGAS precision: a retrieved context is relevant when its best similarity is >= threshold
        select p.query_id, p.position, (max(p.similarity) >= threshold)::integer as rel
        from pair as p
        group by p.query_id, p.position
    ),
    precision_at as (
        select x.query_id,
               sum(x.rel * x.hits::float8 / x.position_rank) as numerator,
               sum(x.rel) as relevant
        from (select pc.*,
                     sum(pc.rel) over (partition by pc.query_id order by pc.position) as hits,
                     row_number() over (partition by pc.query_id order by pc.position) as position_rank
              from per_context as pc) as x
        group by x.query_id
    ),
    per_gold as (
        -- RAGAS recall: a gold text is retrieved when its best similarity is > threshold (strictly, as RAGAS)
        select p.query_id, p.docno, (max(p.similarity) > threshold)::integer as found
        from pair as p
        group by p.query_id, p.docno
    ),
    recall as (
        select g.query_id, sum(g.found) as found, count(*) as gold from per_gold as g group by g.query_id
    ),
    counts as (
        select q.id, q.qid,
               (select count(*) from retrieved as r where r.query_id = q.id) as retrieved,
               (select count(*) from contexts as r where r.query_id = q.id and r.text is null) as ids_only,
               (select count(*) from gold as g where g.query_id = q.id) as reference
        from ragsql.run as ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        where ru.id = rid
    )
    select c.qid,
           case when c.retrieved = 0 or c.reference = 0 then null
                when metric = 'non_llm_context_precision_with_reference'
                    then case when pa.relevant > 0 then pa.numerator / pa.relevant else 0 end
                else rc.found::float8 / rc.gold end,
           case when c.retrieved = 0 and c.ids_only > 0 then 'no context texts: the record gives only ids'
                when c.retrieved = 0 then 'no retrieved contexts'
                when c.reference = 0 then 'no reference context texts' end,
           null::text, null::text, null::text,
           case when c.retrieved > 0 and c.reference > 0 then
               case when metric = 'non_llm_context_precision_with_reference'
                    then jsonb_build_object('contexts', c.retrieved, 'relevant', pa.relevant, 'threshold', threshold)
                    else jsonb_build_object('reference_contexts', rc.gold, 'found', rc.found, 'threshold', threshold)
               end
           end
    from counts as c
    left join precision_at as pa on pa.query_id = c.id
    left join recall as rc on rc.query_id = c.id
    order by c.qid collate "C";
end
$$;
comment on function ragsql.string_context_metric(text, text, float8) is
    'RAGAS''s non-LLM context metrics per query of a run, no judge: non_llm_context_precision_with_reference = '
    'sum over the answer''s contexts i of P@i * rel_i / sum rel_i (0 when none), rel_i = 1 when the context''s best '
    'ragsql.levenshtein_similarity to a gold text (judgments with relevance >= 1 and a text) is >= threshold; '
    'non_llm_context_recall = gold texts whose best similarity to a context is > threshold (strictly, as RAGAS) / '
    'gold texts. threshold defaults to RAGAS''s 0.5. Null with a reason without contexts or gold texts.';

create or replace function ragsql.non_llm_context_precision_with_reference(run text, threshold float8 default 0.5)
returns table (qid text, value float8, reason text)
language sql stable parallel safe
as $$
    select m.qid, m.value, m.reason
    from ragsql.string_context_metric(non_llm_context_precision_with_reference.run,
                                      'non_llm_context_precision_with_reference',
                                      non_llm_context_precision_with_reference.threshold) as m
$$;
comment on function ragsql.non_llm_context_precision_with_reference(text, float8) is
    'RAGAS NonLLMContextPrecisionWithReference per query: ContextPrecision over the answer''s contexts, rel_i = 1 '
    'when the context''s best Levenshtein similarity to a gold text is >= threshold (default 0.5). See '
    'ragsql.string_context_metric.';

create or replace function ragsql.non_llm_context_recall(run text, threshold float8 default 0.5)
returns table (qid text, value float8, reason text)
language sql stable parallel safe
as $$
    select m.qid, m.value, m.reason
    from ragsql.string_context_metric(non_llm_context_recall.run, 'non_llm_context_recall',
                                      non_llm_context_recall.threshold) as m
$$;
comment on function ragsql.non_llm_context_recall(text, float8) is
    'RAGAS NonLLMContextRecall per query: gold texts whose best Levenshtein similarity to a context of the answer '
    'is > threshold (default 0.5) / gold texts. See ragsql.string_context_metric.';
