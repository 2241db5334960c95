-- Retrieval measures (trec_eval 10 with -c semantics; names as ir_measures spells them).
--
-- Every measure of a query is a function of its *ranking profile*, built in one pass over the
-- query's judged-relevant hits in the run (never a scan per measure):
--   rel_ranks  int[]    sorted ranks of retrieved items with relevance >= level
--   prec_cum   float8[] prec_cum[j] = sum over the first j relevant hits of (j' / rank_j')
--   gain_ranks int[]    sorted ranks of retrieved items with a positive grade
--   dcg_cum    float8[] cumulative DCG over gain_ranks (gain / log2(rank + 1))
--   idcg_cum   float8[] cumulative DCG of the ideal ordering of the query's positive grades
--   n_rel      bigint   R: judged items with relevance >= level
-- width_bucket(k, sorted_ranks) counts the ranks <= k, so each formula is one expression.

create or replace function ragsql.precision_at(rel_ranks integer[], k integer)
returns float8
language sql immutable parallel safe
as $$
    select width_bucket(k, rel_ranks)::float8 / k
$$;
comment on function ragsql.precision_at(integer[], integer) is
    'P@k = (relevant items in the top k) / k; k is the denominator even when fewer were retrieved (trec_eval P_k).';

create or replace function ragsql.recall_at(rel_ranks integer[], k integer, n_rel bigint)
returns float8
language sql immutable parallel safe
as $$
    select case when n_rel > 0 then width_bucket(k, rel_ranks)::float8 / n_rel else 0 end
$$;
comment on function ragsql.recall_at(integer[], integer, bigint) is
    'R@k = (relevant items in the top k) / R, R = all relevant judgments of the query; 0 when R = 0 (trec_eval recall_k).';

create or replace function ragsql.success_at(rel_ranks integer[], k integer)
returns float8
language sql immutable parallel safe
as $$
    select case when rel_ranks[1] <= k then 1.0::float8 else 0.0::float8 end
$$;
comment on function ragsql.success_at(integer[], integer) is
    'Success@k (hit rate; the retrieval seed''s Recall@k) = 1 if any relevant item is in the top k, else 0 (trec_eval success_k).';

create or replace function ragsql.reciprocal_rank_at(rel_ranks integer[], k integer)
returns float8
language sql immutable parallel safe
as $$
    select case when rel_ranks[1] <= k then 1.0::float8 / rel_ranks[1] else 0.0::float8 end
$$;
comment on function ragsql.reciprocal_rank_at(integer[], integer) is
    'RR@k = 1 / rank of the first relevant item if it is in the top k, else 0; its mean is MRR (trec_eval recip_rank).';

create or replace function ragsql.average_precision_at(
    rel_ranks integer[], prec_cum float8[], k integer, n_rel bigint)
returns float8
language sql immutable parallel safe
as $$
    select case
        when n_rel > 0 then coalesce(prec_cum[width_bucket(k, rel_ranks)], 0) / n_rel
        else 0
    end
$$;
comment on function ragsql.average_precision_at(integer[], float8[], integer, bigint) is
    'AP@k = sum over relevant items at rank i <= k of P@i, divided by R (all relevant of the query, not by k); '
    '0 when R = 0 (trec_eval map / map_cut_k).';

create or replace function ragsql.context_precision_at(rel_ranks integer[], prec_cum float8[], k integer)
returns float8
language sql immutable parallel safe
as $$
    select coalesce(prec_cum[width_bucket(k, rel_ranks)] / width_bucket(k, rel_ranks), 0)
$$;
comment on function ragsql.context_precision_at(integer[], float8[], integer) is
    'ContextPrecision@k (RAGAS) = sum over i <= k of P@i * rel_i / (relevant items in the top k); 0 when none. '
    'rel_ranks may come from gold labels or from LLM verdicts (ragsql.relevance_profile). '
    'Seed examples: [1,0,1,0,1] -> 0.7556, [0,0,0,1,1] -> 0.325, [1,1,1,0,0] -> 1.';

create or replace function ragsql.r_precision(rel_ranks integer[], n_rel bigint)
returns float8
language sql immutable parallel safe
as $$
    select case when n_rel > 0 then width_bucket(n_rel::integer, rel_ranks)::float8 / n_rel else 0 end
$$;
comment on function ragsql.r_precision(integer[], bigint) is
    'Rprec = (relevant items in the top R) / R, R = relevant judgments of the query; 0 when R = 0 (trec_eval Rprec).';

create or replace function ragsql.ndcg_at(
    gain_ranks integer[], dcg_cum float8[], idcg_cum float8[], k integer)
returns float8
language sql immutable parallel safe
as $$
    select case
        when cardinality(idcg_cum) > 0
            then coalesce(dcg_cum[width_bucket(k, gain_ranks)], 0)
                 / idcg_cum[least(k, cardinality(idcg_cum))]
        else 0
    end
$$;
comment on function ragsql.ndcg_at(integer[], float8[], float8[], integer) is
    'nDCG@k = DCG@k / IDCG@k, DCG@k = sum over i <= k of gain_i / log2(i + 1); IDCG from all positive grades of '
    'the query sorted descending; 0 when IDCG = 0. Gain is the grade itself (trec_eval ndcg_cut_k) or '
    '2^grade - 1 (nDCG_burges@k), whatever the relevance level.';

create or replace function ragsql.f1_at(rel_ranks integer[], k integer, n_rel bigint)
returns float8
language sql immutable parallel safe
as $$
    -- 2PR / (P + R) = 2 * hits / (k + R)
    select case when width_bucket(k, rel_ranks) > 0 then 2.0 * width_bucket(k, rel_ranks) / (k + n_rel) else 0 end
$$;
comment on function ragsql.f1_at(integer[], integer, bigint) is
    'F1@k = harmonic mean of P@k and R@k = 2 * (relevant in the top k) / (k + R); 0 when none is in the top k (ranx f1@k).';

create or replace function ragsql.bpref(rel_ranks integer[], nonrel_ranks integer[], n_rel bigint, n_nonrel bigint)
returns float8
language sql immutable parallel safe
as $$
    select case when n_rel > 0 then coalesce(sum(
               case when above > 0 then 1.0 - least(above, n_rel)::float8 / least(n_nonrel, n_rel) else 1.0 end), 0) / n_rel
           else 0 end
    from (select width_bucket(r, nonrel_ranks) as above from unnest(rel_ranks) as r) as h
$$;
comment on function ragsql.bpref(integer[], integer[], bigint, bigint) is
    'Bpref = 1/R * sum over retrieved relevant items of 1 - min(judged non-relevant ranked above it, R) / '
    'min(N, R), N = judged non-relevant items of the query (grade 0 .. level - 1; negative grades are unjudged); '
    'unjudged items are ignored; 0 when R = 0 (trec_eval bpref).';

create or replace function ragsql.inf_ap(
    rel_ranks integer[], nonrel_ranks integer[], pool_ranks integer[], n_rel bigint)
returns float8
language sql immutable parallel safe
as $$
    -- for the i-th relevant item at rank r (j = r - 1 items above it): 1 if j = 0, else
    -- 1/(j+1) + j/(j+1) * (judged or pooled above / j) * (relevant above + e) / (judged above + 2e)
    select case when n_rel > 0 then coalesce(sum(case when h.r = 1 then 1.0 else
               1.0 / h.r + ((h.r - 1.0) / h.r) * ((h.i - 1 + h.nonrel + h.pooled)::float8 / (h.r - 1))
                           * ((h.i - 1 + 0.00001) / (h.i - 1 + h.nonrel + 2 * 0.00001))
           end), 0) / n_rel else 0 end
    from (select u.r, u.i, width_bucket(u.r, nonrel_ranks) as nonrel, width_bucket(u.r, pool_ranks) as pooled
          from unnest(rel_ranks) with ordinality as u(r, i)) as h
$$;
comment on function ragsql.inf_ap(integer[], integer[], integer[], bigint) is
    'infAP (Yilmaz & Aslam) as trec_eval computes it: AP estimated from a sample of the judgment pool, where a '
    'negative grade marks an item pooled but not judged (assumed relevant in the proportion of the judged ones) and '
    'items outside the pool count as non-relevant; equals AP when every pooled item is judged.';

create or replace function ragsql.err_at(gain_ranks integer[], gain_grades integer[], k integer)
returns float8
language sql immutable parallel safe
as $$
    -- ERR@k = sum over i <= k of R_i / i * prod over j < i of (1 - R_j), R = (2^grade - 1) / 2^4
    select coalesce(sum(h.stop / h.rank * exp(h.passed)), 0)
    from (select g.rank, g.stop,
                 coalesce(sum(ln(1 - g.stop)) over (order by g.rank rows between unbounded preceding and 1 preceding), 0)
                     as passed
          from (select u.rank, (2.0::float8 ^ least(u.grade, 4) - 1) / 16 as stop
                from unnest(gain_ranks, gain_grades) as u(rank, grade)
                where u.rank <= k) as g) as h
$$;
comment on function ragsql.err_at(integer[], integer[], integer) is
    'ERR@k (expected reciprocal rank, Chapelle et al.) = sum over i <= k of R_i / i * prod over j < i of (1 - R_j), '
    'R = (2^grade - 1) / 16: grades 0..4 as gdeval (ir_measures ERR@k); a grade above 4 counts as 4.';

create or replace function ragsql.rbp_at(rel_ranks integer[], k integer, p float8)
returns float8
language sql immutable parallel safe
as $$
    select (1 - p) * coalesce(sum(p ^ (r - 1)), 0) from unnest(rel_ranks) as r where r <= k
$$;
comment on function ragsql.rbp_at(integer[], integer, float8) is
    'RBP(p)@k (rank-biased precision, Moffat & Zobel) = (1 - p) * sum over relevant items at rank i <= k of '
    'p^(i-1), relevance binary at the level (ir_measures RBP(rel=level, p=p), cwl_eval).';

create or replace function ragsql.judged_at(judged_ranks integer[], k integer, retrieved bigint)
returns float8
language sql immutable parallel safe
as $$
    select case when least(k, retrieved) > 0 then width_bucket(k, judged_ranks)::float8 / least(k, retrieved) else 0 end
$$;
comment on function ragsql.judged_at(integer[], integer, bigint) is
    'Judged@k = share of the top min(k, retrieved) items that have a judgment of any grade; 0 when nothing was '
    'retrieved (ir_measures Judged@k).';

create or replace function ragsql.relevance_profile(relevant boolean[])
returns table (rel_ranks integer[], prec_cum float8[])
language sql immutable parallel safe
as $$
    select coalesce(array_agg(h.rank order by h.rank), '{}'),
           coalesce(array_agg(h.cum order by h.rank), '{}')
    from (
        select p.rank, sum(p.hit::float8 / p.rank) over (order by p.rank) as cum
        from (
            select u.rank::integer, count(*) over (order by u.rank) as hit
            from unnest(relevance_profile.relevant) with ordinality as u(rel, rank)
            where u.rel
        ) as p
    ) as h
$$;
comment on function ragsql.relevance_profile(boolean[]) is
    'Ranking profile (rel_ranks, prec_cum) of a ranked list of yes/no relevance verdicts, for '
    'ragsql.context_precision_at and the other rank formulas: e.g. LLM verdicts on a sample''s contexts.';

create or replace function ragsql.measure_alias(name text)
returns text
language sql immutable parallel safe
as $$
    -- trec_eval (P_5, recall_10, ndcg_cut_10, map_cut_10, success_5, recip_rank, map, ndcg) and ranx
    -- (precision@5, recall@10, hit_rate@5, mrr@10, map@10, ndcg@10, r-precision) spellings, and MRR / MAP, as
    -- ragsql/registry.py declares them (ragsql._measure_spelling)
    select coalesce(
        (select a.family || case when a.with_k then '@' || substring(spelled.t from a.pattern) else '' end
         from ragsql._measure_spelling() as a
         where spelled.t ~ a.pattern
         limit 1),
        measure_alias.name)
    from (select lower(btrim(coalesce(measure_alias.name, ''))) as t) as spelled
$$;
comment on function ragsql.measure_alias(text) is
    'The ragsql spelling of a measure named as trec_eval (P_5, ndcg_cut_10, recall_10, map, recip_rank, num_ret, '
    'num_rel, num_rel_ret) or ranx (precision@5, hit_rate@5, mrr@10, map@10, ndcg@10, r-precision) users type it, '
    'or MRR / MAP; other names unchanged.';

create or replace function ragsql._names(names text[], what text, example text)
returns table (ord integer, name text)
language plpgsql immutable parallel safe
as $$
begin
    if names is null or cardinality(names) = 0 then
        raise exception 'no % named', what using errcode = 'invalid_parameter_value', hint = 'e.g. ' || example;
    end if;
    return query select n.ord::integer, n.name from unnest(names) with ordinality as n(name, ord);
end
$$;
comment on function ragsql._names(text[], text, text) is
    'The names a caller asked for, numbered from 1 in their order; invalid_parameter_value when there is none.';

drop function if exists ragsql._measure_spec(text[]);  -- its columns grew (rel, p)
create function ragsql._measure_spec(measures text[])
returns table (ord integer, measure text, family text, k integer, rel integer, p float8)
language plpgsql immutable parallel safe
as $$
declare
    name text;
    m text[];
    fam text;
    cutoff integer;
    param text;
    pair text[];
    fam_row record;
    families text;
    measures_hint text;
begin
    -- the families and their parameters as ragsql/registry.py declares them (ragsql._measure_family)
    select string_agg(lower(f.family), '|'),
           'measures: ' || string_agg(f.family || case f.cutoff when 'none' then '' else '@k' end, ', ')
           || ' (' || string_agg(f.family, ', ') filter (where f.cutoff = 'optional')
           || ' without @k cover the whole ranking); parameters as ir_measures writes them: P(rel=2)@10, '
           'RBP(p=0.9), NumRet(rel=1); trec_eval and ranx names (ndcg_cut_10, P_5, recall_10, map, bpref, num_ret, '
           'MRR, hit_rate@5, mrr@10, map@10, f1@5) are accepted'
      into families, measures_hint
    from ragsql._measure_family() as f;
    for ord, name in select n.ord, n.name from ragsql._names(measures, 'measure', 'array[''P@5'', ''nDCG@10'']') as n
    loop
        m := regexp_match(ragsql.measure_alias(name),
            '^\s*(' || families || ')(?:\(([^()]*)\))?(?:@([0-9]{1,9}))?\s*$', 'i');
        if m is null then
            raise exception 'unknown measure "%"', name using errcode = 'invalid_parameter_value', hint = measures_hint;
        end if;
        select * into fam_row from ragsql._measure_family() as f where lower(f.family) = lower(m[1]);
        fam := fam_row.family;
        cutoff := m[3]::integer;
        rel := null;
        p := null;
        foreach param in array coalesce(string_to_array(nullif(btrim(m[2]), ''), ','), '{}') loop
            pair := regexp_match(param, '^\s*(rel|p)\s*=\s*(-?[0-9]{1,9}|[0-9]*\.[0-9]+|[0-9]+\.?)\s*$', 'i');
            if pair is null then
                raise exception 'measure "%": unknown parameter "%"', name, btrim(param)
                    using errcode = 'invalid_parameter_value', hint = 'parameters: rel=<grade> (most measures), p=<persistence> (RBP)';
            elsif lower(pair[1]) = 'rel' then
                if not fam_row.takes_rel then
                    raise exception 'measure "%": % takes no rel (it reads the grades themselves)', name, fam
                        using errcode = 'invalid_parameter_value';
                elsif pair[2] !~ '^-?[0-9]+$' then
                    raise exception 'measure "%": rel must be an integer grade', name using errcode = 'invalid_parameter_value';
                end if;
                rel := pair[2]::integer;
            else
                if fam_row.default_p is null then
                    raise exception 'measure "%": only % takes p', name,
                        (select string_agg(f.family, ', ') from ragsql._measure_family() as f where f.default_p is not null)
                        using errcode = 'invalid_parameter_value';
                end if;
                p := pair[2]::float8;
                if p <= 0 or p >= 1 then
                    raise exception 'measure "%": p must be between 0 and 1 (exclusive)', name
                        using errcode = 'invalid_parameter_value';
                end if;
            end if;
        end loop;
        if cutoff = 0 then
            raise exception 'measure "%": the cutoff k must be at least 1', name
                using errcode = 'invalid_parameter_value';
        elsif fam_row.cutoff = 'none' and cutoff is not null then
            raise exception 'measure "%": % takes no cutoff', name, fam
                using errcode = 'invalid_parameter_value';
        elsif fam_row.cutoff = 'required' and cutoff is null then
            raise exception 'measure "%": % needs a cutoff, e.g. %@10', name, fam, fam
                using errcode = 'invalid_parameter_value';
        end if;
        if fam_row.default_p is not null then
            p := coalesce(p, fam_row.default_p);
        end if;
        measure := fam
            || coalesce('(' || concat_ws(',', 'rel=' || rel, 'p=' || p) || ')', '')
            || coalesce('@' || cutoff, '');
        measure := replace(measure, '()', '');
        family := fam;
        k := coalesce(cutoff, 2147483647);
        return next;
    end loop;
end
$$;
comment on function ragsql._measure_spec(text[]) is
    'Parses measure names (ir_measures spelling with its rel and p parameters, any case) into family, cutoff, '
    'relevance level (null: the caller''s) and RBP persistence.';

create or replace function ragsql._known(looked_up anyelement, what text, name text, hint text,
                                         code text default 'no_data_found')
returns anyelement
language plpgsql immutable parallel safe
as $$
begin
    if looked_up is null then
        raise exception 'unknown % "%"', what, name using errcode = _known.code, hint = _known.hint;
    end if;
    return looked_up;
end
$$;
comment on function ragsql._known(anyelement, text, text, text, text) is
    'looked_up, found by a name: raises unknown <what> "<name>" (errcode code, default no_data_found) when it is null.';

create or replace function ragsql._run_id(run text)
returns bigint
language plpgsql stable parallel safe
as $$
begin
    return ragsql._known((select r.id from ragsql.run as r where r.name = _run_id.run), 'run', run,
                         'see: select name from ragsql.run');
end
$$;
comment on function ragsql._run_id(text) is 'Id of the named run; raises no_data_found for an unknown run.';

create or replace function ragsql.run_judgments(run_id bigint)
returns table (query_id bigint, qid text, docno text, relevance integer)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    version bigint;
begin
    -- a run retrieved from a corpus version by ragsql reads the dataset's gold evidence mapped onto that version's
    -- chunks; any other run reads the dataset's judgments. The version is looked up first, by the run's key: on
    -- Citus that is one shard, and each branch below then reads only reference (or coordinator) tables.
    select rr.version_id into version from ragsql.retrieval_run as rr where rr.run_id = run_judgments.run_id;
    if version is null then
        return query
        select j.query_id, q.qid, j.docno, j.relevance
        from ragsql.run as ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        join ragsql.judgment as j on j.query_id = q.id
        where ru.id = run_judgments.run_id;
    else
        return query
        select vj.query_id, q.qid, vj.docno, vj.relevance
        from ragsql.run as ru
        cross join lateral ragsql.version_judgment(version, ru.dataset_id) as vj
        join ragsql.query as q on q.id = vj.query_id
        where ru.id = run_judgments.run_id;
    end if;
end
$$;
comment on function ragsql.run_judgments(bigint) is
    'The judgments a run is evaluated on: its dataset''s, or for a run of ragsql retrieve the dataset''s gold '
    'evidence mapped onto the chunks of its corpus version (ragsql.version_judgment).';

create or replace function ragsql._evaluate(run_id bigint, measures text[], rel_level integer)
returns table (
    query_id bigint, qid text, ord integer, measure text, value float8,
    relevant bigint, retrieved boolean)
language plpgsql stable parallel safe
-- the run's hits are found by probing (or merging with) the run's unique (query, docno) index: with the judgments'
-- number known, the planner hashed every result of the run instead (500,000 rows for 75,000 judgments), about 1.4x
-- the CPU time of the probes (bench/retrieval_metrics.py). No other join here is large enough for a hash to matter.
set enable_hashjoin = off
as $$
#variable_conflict use_column
declare
    dataset bigint;
    version bigint;
    j_query bigint[];
    j_qid text[];
    j_docno text[];
    j_rel integer[];
begin
    -- a run retrieved from a corpus version by ragsql is evaluated on the gold mapped onto that version's chunks
    -- (ragsql.run_judgments), read first and passed in as arrays: on Citus the query over the run's results is
    -- one shard's, where a function reading the coordinator's corpus tables cannot run. Any other run's judgments
    -- are read in that query itself (query and judgment are reference tables there): building and unnesting the
    -- arrays cost several times what reading the judgments does.
    select ru.dataset_id into dataset from ragsql.run as ru where ru.id = _evaluate.run_id;
    select rr.version_id into version from ragsql.retrieval_run as rr where rr.run_id = _evaluate.run_id;
    if version is not null then
        select array_agg(g.query_id), array_agg(g.qid), array_agg(g.docno), array_agg(g.relevance)
        into j_query, j_qid, j_docno, j_rel
        from ragsql.run_judgments(_evaluate.run_id) as g;
    end if;
    return query
    with spec as materialized (
        select s.ord, s.measure, s.family, s.k, s.p, s.rel, coalesce(s.rel, _evaluate.rel_level) as level
        from ragsql._measure_spec(_evaluate.measures) as s
    ),
    level as materialized (
        select distinct sp.level from spec as sp
    ),
    need as materialized (
        -- what the measures read beyond the relevant hits and their gains: every judged hit (Bpref, infAP,
        -- Judged), the grades (ERR), the number of results (NumRet, Judged)
        select coalesce(bool_or(sp.family in ('Bpref', 'infAP', 'Judged')), false) as judged_hits,
               coalesce(bool_or(sp.family = 'ERR'), false) as graded,
               coalesce(bool_or(sp.family = 'nDCG_burges'), false) as burges,
               coalesce(bool_or(sp.family = 'Judged' or (sp.family = 'NumRet' and sp.rel is null)), false) as counted,
               min(sp.level) as lowest
        from spec as sp
    ),
    judged_row as materialized (
        select j.query_id, q.qid, j.docno, j.relevance
        from ragsql.query as q
        join ragsql.judgment as j on j.query_id = q.id
        where q.dataset_id = dataset and version is null
        union all
        select g.query_id, g.qid, g.docno, g.relevance
        from unnest(j_query, j_qid, j_docno, j_rel) as g(query_id, qid, docno, relevance)
    ),
    judged_query as (
        -- R and N (judged non-relevant: grades 0 .. level - 1) of each judged query at each level asked
        select jr.query_id,
               l.level,
               min(jr.qid) as qid,
               count(*) filter (where jr.relevance >= l.level) as n_rel,
               count(*) filter (where jr.relevance >= 0 and jr.relevance < l.level) as n_nonrel
        from judged_row as jr
        cross join level as l
        group by jr.query_id, l.level
    ),
    query_profile as (
        -- the cumulative ideal DCG (linear and exponential gain) of each query with a positive grade: from those
        -- grades alone (they come first in the ideal order), once whatever the levels asked. Ties in grade are
        -- ordered by docno so that the window's order is the aggregate's, and nothing is sorted twice.
        select g.query_id,
               array_agg(g.cum_lin order by g.relevance desc, g.docno collate "C") as idcg_cum,
               coalesce(array_agg(g.cum_exp order by g.relevance desc, g.docno collate "C")
                            filter (where g.cum_exp is not null), '{}') as idcg_exp_cum
        from (
            select o.query_id, o.docno, o.relevance,
                   sum(o.relevance * o.discount) over w as cum_lin,
                   sum(case when need.burges then (2.0::float8 ^ o.relevance - 1) * o.discount end) over w as cum_exp
            from (
                select jr.query_id, jr.docno, jr.relevance,
                       ln(2::float8) / ln((row_number() over w + 1)::float8) as discount
                from judged_row as jr
                where jr.relevance > 0
                window w as (partition by jr.query_id order by jr.relevance desc, jr.docno collate "C"
                             rows unbounded preceding)
            ) as o
            cross join need
            window w as (partition by o.query_id order by o.relevance desc, o.docno collate "C"
                         rows unbounded preceding)
        ) as g
        group by g.query_id
    ),
    hit as (
        -- judged items the run retrieved with their rank: those with gain or relevant at a level asked, and
        -- every judged one when a measure reads them
        select jr.query_id, r.rank, jr.relevance
        from judged_row as jr
        join ragsql.run_result as r
          on r.run_id = _evaluate.run_id and r.query_id = jr.query_id and r.docno = jr.docno
        cross join need
        where jr.relevance > 0 or jr.relevance >= need.lowest or need.judged_hits
    ),
    hit_profile as (
        -- at each level, in one window pass: ranks of the relevant hits with their cumulative precision, of the
        -- judged non-relevant ones; graded gains with their DCG, judged and pooled-unjudged ranks (the same at
        -- every level: computed once when, as usual, there is one)
        select c.query_id, c.level,
               coalesce(array_agg(c.rank order by c.rank) filter (where c.is_rel), '{}') as rel_ranks,
               coalesce(array_agg(c.prec_cum order by c.rank) filter (where c.is_rel), '{}') as prec_cum,
               coalesce(array_agg(c.rank order by c.rank)
                            filter (where c.judged_hits and not c.is_rel and c.relevance >= 0), '{}') as nonrel_ranks,
               coalesce(array_agg(c.rank order by c.rank) filter (where c.relevance > 0), '{}') as gain_ranks,
               coalesce(array_agg(c.relevance order by c.rank) filter (where c.graded and c.relevance > 0), '{}')
                   as gain_grades,
               coalesce(array_agg(c.dcg_cum order by c.rank) filter (where c.relevance > 0), '{}') as dcg_cum,
               coalesce(array_agg(c.dcg_exp_cum order by c.rank) filter (where c.dcg_exp_cum is not null and c.relevance > 0),
                        '{}') as dcg_exp_cum,
               coalesce(array_agg(c.rank order by c.rank) filter (where c.judged_hits), '{}') as judged_ranks,
               coalesce(array_agg(c.rank order by c.rank) filter (where c.judged_hits and c.relevance < 0), '{}')
                   as pool_ranks
        from (
            select n.query_id, n.rank, n.relevance, n.level, n.is_rel, n.judged_hits, n.graded,
                   sum(case when n.is_rel then n.nth::float8 / n.rank end) over w as prec_cum,
                   sum(greatest(n.relevance, 0) * n.discount) over w as dcg_cum,
                   sum(case when n.burges then (2.0::float8 ^ greatest(n.relevance, 0) - 1) * n.discount end)
                       over w as dcg_exp_cum
            from (
                select h.query_id, h.rank, h.relevance, l.level, h.relevance >= l.level as is_rel,
                       need.judged_hits, need.graded, need.burges,
                       count(*) filter (where h.relevance >= l.level) over w as nth,
                       ln(2::float8) / ln((h.rank + 1)::float8) as discount
                from hit as h
                cross join level as l
                cross join need
                window w as (partition by h.query_id, l.level order by h.rank)
            ) as n
            window w as (partition by n.query_id, n.level order by n.rank)
        ) as c
        group by c.query_id, c.level
    ),
    profile as materialized (
        select jq.query_id,
               jq.qid,
               jq.level,
               jq.n_rel,
               jq.n_nonrel,
               coalesce(hp.rel_ranks, '{}') as rel_ranks,
               coalesce(hp.prec_cum, '{}') as prec_cum,
               coalesce(hp.nonrel_ranks, '{}') as nonrel_ranks,
               coalesce(hp.gain_ranks, '{}') as gain_ranks,
               coalesce(hp.gain_grades, '{}') as gain_grades,
               coalesce(hp.dcg_cum, '{}') as dcg_cum,
               coalesce(hp.dcg_exp_cum, '{}') as dcg_exp_cum,
               coalesce(hp.judged_ranks, '{}') as judged_ranks,
               coalesce(hp.pool_ranks, '{}') as pool_ranks,
               coalesce(ql.idcg_cum, '{}') as idcg_cum,
               coalesce(ql.idcg_exp_cum, '{}') as idcg_exp_cum,
               -- a query with a hit was retrieved; the others are probed in the primary key (not a hashed scan
               -- of every result)
               hp.query_id is not null
                   or (select true from ragsql.run_result as r
                       where r.run_id = _evaluate.run_id and r.query_id = jq.query_id
                       limit 1) is not null as retrieved,
               case when need.counted then
                   (select count(*) from ragsql.run_result as r
                    where r.run_id = _evaluate.run_id and r.query_id = jq.query_id)
               end as n_ret
        from judged_query as jq
        cross join need
        left join query_profile as ql on ql.query_id = jq.query_id
        left join hit_profile as hp on hp.query_id = jq.query_id and hp.level = jq.level
    )
    select p.query_id,
           p.qid,
           s.ord,
           s.measure,
           case s.family
               when 'P' then ragsql.precision_at(p.rel_ranks, s.k)
               when 'R' then ragsql.recall_at(p.rel_ranks, s.k, p.n_rel)
               when 'Success' then ragsql.success_at(p.rel_ranks, s.k)
               when 'RR' then ragsql.reciprocal_rank_at(p.rel_ranks, s.k)
               when 'AP' then ragsql.average_precision_at(p.rel_ranks, p.prec_cum, s.k, p.n_rel)
               when 'ContextPrecision' then ragsql.context_precision_at(p.rel_ranks, p.prec_cum, s.k)
               when 'Rprec' then ragsql.r_precision(p.rel_ranks, p.n_rel)
               when 'nDCG' then ragsql.ndcg_at(p.gain_ranks, p.dcg_cum, p.idcg_cum, s.k)
               when 'nDCG_burges' then ragsql.ndcg_at(p.gain_ranks, p.dcg_exp_cum, p.idcg_exp_cum, s.k)
               when 'F1' then ragsql.f1_at(p.rel_ranks, s.k, p.n_rel)
               when 'Bpref' then ragsql.bpref(p.rel_ranks, p.nonrel_ranks, p.n_rel, p.n_nonrel)
               when 'infAP' then ragsql.inf_ap(p.rel_ranks, p.nonrel_ranks, p.pool_ranks, p.n_rel)
               when 'ERR' then ragsql.err_at(p.gain_ranks, p.gain_grades, s.k)
               when 'RBP' then ragsql.rbp_at(p.rel_ranks, s.k, s.p)
               when 'Judged' then ragsql.judged_at(p.judged_ranks, s.k, p.n_ret)
               when 'NumRet' then case when s.rel is not null then cardinality(p.rel_ranks) else p.n_ret end
               when 'NumRel' then p.n_rel
               when 'NumRelRet' then cardinality(p.rel_ranks)
           end,
           p.n_rel,
           p.retrieved
    from spec as s
    join profile as p on p.level = s.level;
end
$$;
comment on function ragsql._evaluate(bigint, text[], integer) is
    'Every requested measure for every judged query of a run, from one pass over its relevant hits.';

create or replace function ragsql.evaluate(run text, measures text[] default null, rel_level integer default 1)
returns table (qid text, measure text, value float8, relevant bigint, retrieved boolean)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select e.qid, e.measure, e.value, e.relevant, e.retrieved
    from ragsql._evaluate(
        ragsql._run_id(evaluate.run),
        coalesce(evaluate.measures, array(select d.measure from ragsql.default_measure as d order by d.position)),
        evaluate.rel_level
    ) as e
    order by e.qid collate "C", e.ord;
end
$$;
comment on function ragsql.evaluate(text, text[], integer) is
    'Per-query values of several measures in one pass (default: ragsql.default_measure). Covers every query '
    'with judgments in the run''s dataset (trec_eval -c): a judged query missing from the run scores 0 '
    '(retrieved = false), one with no relevant item (relevant = 0) scores 0; unjudged queries are ignored. '
    'rel_level is trec_eval -l: relevance >= rel_level is relevant, unless the measure names its own (P(rel=2)@10); '
    'nDCG and ERR read the grades themselves, Judged any judgment.';

create or replace function ragsql.measure(run text, measure text, rel_level integer default 1)
returns table (qid text, value float8)
language sql stable parallel safe
as $$
    select e.qid, e.value
    from ragsql.evaluate(measure.run, array[measure.measure], measure.rel_level) as e
$$;
comment on function ragsql.measure(text, text, integer) is
    'Per-query value of one measure: Success@k, R@k, P@k, RR@k, nDCG@k, nDCG_burges@k, AP, AP@k, '
    'ContextPrecision@k, Rprec, F1@k, Bpref, infAP, ERR@k, RBP(p=0.8), Judged@k, NumRet, NumRel, NumRelRet '
    '(without @k: the whole ranking; a relevance level per measure as ir_measures writes it, P(rel=2)@10). '
    'See ragsql.evaluate for which queries count.';

create or replace function ragsql.summarize(run text, measures text[] default null, rel_level integer default 1)
returns table (
    measure text, value float8, queries bigint, answerable bigint, no_relevant bigint,
    missing bigint, value_answerable float8)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select e.measure,
           -- counts (NumRet, NumRel, NumRelRet) add up over queries, as trec_eval and ir_measures report them
           -- in query order: a float mean taken in plan order can change in the last bit between calls
           case when e.measure ~ '^Num' then sum(e.value order by e.query_id)
                else avg(e.value order by e.query_id) end,
           count(*),
           count(*) filter (where e.relevant > 0),
           count(*) filter (where e.relevant = 0),
           count(*) filter (where not e.retrieved),
           case when e.measure ~ '^Num' then sum(e.value order by e.query_id) filter (where e.relevant > 0)
                else avg(e.value order by e.query_id) filter (where e.relevant > 0) end
    from ragsql._evaluate(
        ragsql._run_id(summarize.run),
        coalesce(summarize.measures, array(select d.measure from ragsql.default_measure as d order by d.position)),
        summarize.rel_level
    ) as e
    group by e.measure, e.ord
    order by e.ord;
end
$$;
comment on function ragsql.summarize(text, text[], integer) is
    'Run value of each measure: value = mean over all judged queries (trec_eval -c; missing = 0; the sum for '
    'NumRet, NumRel and NumRelRet), queries = '
    'judged queries, answerable = those with a relevant item, no_relevant = those without, missing = judged '
    'queries absent from the run, value_answerable = mean over answerable queries only.';
