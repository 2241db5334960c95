-- Rank fusion of stored runs, as ranx's fuse computes it: each run's scores normalised per query, then fused.
--
--   ragsql.fused(runs, method, norm, weights, k)  the fused ranking (qid, docno, score, rank), nothing stored
--   ragsql.fuse(run, runs, method, norm, ...)     the same stored as a run of the runs' dataset
--
-- Methods (ranx's names, and comb* spellings): sum, mnz, anz, max, min, wsum (weights), rrf (k), isr, log_isr,
-- bordafuse. Normalisations: min-max (ranx's default), max, sum, zmuv, rank, none. A run's order is its stored
-- rank; the fused ranking is score descending, ties by docno descending (trec_eval's order; ranx leaves the order
-- of equal scores to numpy's sort). A query a run did not answer counts as an empty result list there.

create or replace function ragsql._fusion_method(method text)
returns text
language plpgsql immutable parallel safe
as $$
declare
    spelled text := lower(btrim(coalesce(method, '')));
begin
    spelled := case when spelled like 'comb%' then substr(spelled, 5) else spelled end;
    spelled := case spelled when 'borda' then 'bordafuse' when 'weighted_sum' then 'wsum' else spelled end;
    if spelled not in ('sum', 'mnz', 'anz', 'max', 'min', 'wsum', 'rrf', 'isr', 'log_isr', 'bordafuse') then
        raise exception 'unknown fusion method "%"', method
            using errcode = 'invalid_parameter_value',
                  hint = 'methods: rrf, combsum, combmnz, combanz, combmax, combmin, wsum, isr, log_isr, bordafuse';
    end if;
    return spelled;
end
$$;
comment on function ragsql._fusion_method(text) is 'ranx''s name of a fusion method (combsum -> sum, borda -> bordafuse).';

create or replace function ragsql.fused(
    runs text[], method text default 'rrf', norm text default 'min-max', weights float8[] default null,
    k integer default 60)
returns table (qid text, docno text, score float8, rank integer)
language plpgsql stable parallel safe
as $$
declare
    how constant text := ragsql._fusion_method(method);
    scale constant text := lower(btrim(coalesce(norm, 'none')));
    ids bigint[];
    name text;
begin
    if coalesce(cardinality(runs), 0) < 2 then
        raise exception 'fusion needs two runs or more' using errcode = 'invalid_parameter_value';
    elsif scale not in ('min-max', 'max', 'sum', 'zmuv', 'rank', 'none') then
        raise exception 'unknown normalisation "%"', norm
            using errcode = 'invalid_parameter_value', hint = 'normalisations: min-max, max, sum, zmuv, rank, none';
    elsif how = 'wsum' and coalesce(cardinality(weights), 0) <> cardinality(runs) then
        raise exception 'wsum needs one weight per run: % runs, % weights', cardinality(runs), coalesce(cardinality(weights), 0)
            using errcode = 'invalid_parameter_value';
    elsif how = 'wsum' and exists (select from unnest(weights) as w
                                   where w is null or w in ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)) then
        -- one NaN or infinite weight would make every fused score NaN (inf - inf, 0 * inf) and still be stored
        raise exception 'wsum weights must be finite numbers, got %', weights
            using errcode = 'invalid_parameter_value', hint = 'e.g. array[0.7, 0.3], one weight per run';
    elsif how <> 'wsum' and weights is not null then
        raise exception 'weights are for wsum, not %', how using errcode = 'invalid_parameter_value';
    elsif how = 'rrf' and (k is null or k < 0) then
        raise exception 'rrf needs k >= 0' using errcode = 'invalid_parameter_value';
    end if;
    foreach name in array runs loop
        perform ragsql._comparable_runs(runs[1], name);  -- unknown run or another dataset: one clear error
        ids := ids || ragsql._run_id(name);
    end loop;
    if cardinality(ids) <> (select count(distinct i) from unnest(ids) as i) then
        raise exception 'a run is named twice' using errcode = 'invalid_parameter_value';
    end if;
    return query
    with src as (
        select u.n as run_no, r.query_id, r.docno, r.rank as pos, coalesce(r.score, 0) as raw
        from unnest(ids) with ordinality as u(id, n)
        join ragsql.run_result as r on r.run_id = u.id
    ),
    per_list as (
        -- each run's list for a query: its size and the statistics its normalisation reads
        -- float sums in list order: in plan order they change in the last bit from one call to the next
        select s.run_no, s.query_id, count(*) as size, min(s.raw) as lo, max(s.raw) as hi,
               sum(s.raw order by s.pos) as total, avg(s.raw order by s.pos) as mean,
               stddev_pop(s.raw order by s.pos) as sd
        from src as s
        group by s.run_no, s.query_id
    ),
    normed as (
        select s.run_no, s.query_id, s.docno,
               -- the position in the list (ranx: the order of the run's results), 1-based
               row_number() over (partition by s.run_no, s.query_id order by s.pos) as i,
               l.size,
               case scale
                   when 'none' then s.raw
                   when 'min-max' then (s.raw - l.lo) / greatest(l.hi - l.lo, 1e-9)
                   when 'max' then s.raw / greatest(l.hi, 1e-9)
                   when 'sum' then (s.raw - l.lo) / greatest(l.total - l.lo * l.size, 1e-9)
                   when 'zmuv' then (s.raw - l.mean) / greatest(l.sd, 1e-9)
                   when 'rank' then 1 - (row_number() over (partition by s.run_no, s.query_id order by s.pos) - 1)::float8 / l.size
               end as value
        from src as s
        join per_list as l using (run_no, query_id)
    ),
    candidates as (
        -- bordafuse: the documents any run returned for the query, and the points every run gives the ones it
        -- did not return ((candidates - its list size + 1) / 2; an unanswered query is an empty list)
        select c.query_id, c.n,
               (select sum((c.n - coalesce(l.size, 0) + 1) / 2.0)
                from generate_series(1, cardinality(ids)) as g(run_no)
                left join per_list as l on l.run_no = g.run_no and l.query_id = c.query_id) as unranked
        from (select s.query_id, count(distinct s.docno) as n from src as s group by s.query_id) as c
    ),
    scored as (
        -- float sums in run order (ranx's order), so a fused score is the same bits on every call and plan
        select d.query_id, d.docno,
               case how
                   when 'sum' then sum(d.value order by d.run_no)
                   when 'mnz' then sum(d.value order by d.run_no) * count(*)
                   when 'anz' then sum(d.value order by d.run_no) / count(*)
                   -- ranx counts a run without the document as -1e9 (max) or 1e9 (min), which matters when
                   -- a normalisation leaves values beyond those (max of negative scores)
                   when 'max' then greatest(max(d.value), case when count(*) < cardinality(ids) then -1e9 end)
                   when 'min' then least(min(d.value), case when count(*) < cardinality(ids) then 1e9 end)
                   when 'wsum' then sum(weights[d.run_no] * d.value order by d.run_no)
                   when 'rrf' then sum(1.0 / (fused.k + d.i))
                   when 'isr' then sum(1.0 / (d.i * d.i)) * count(*)
                   when 'log_isr' then sum(1.0 / (d.i * d.i)) * ln(count(*))
                   when 'bordafuse' then sum(c.n - d.i + 1 - (c.n - d.size + 1) / 2.0) + min(c.unranked)
               end as fused_score
        from normed as d
        join candidates as c using (query_id)
        group by d.query_id, d.docno
    )
    select q.qid, f.docno, f.fused_score,
           (row_number() over (partition by f.query_id order by f.fused_score desc, f.docno collate "C" desc))::integer
    from scored as f
    join ragsql.query as q on q.id = f.query_id
    order by q.qid collate "C", 4;
end
$$;
comment on function ragsql.fused(text[], text, text, float8[], integer) is
    'Rank fusion of runs of one dataset as ranx''s fuse(runs, norm, method) computes it: each run''s scores '
    'normalised per query (min-max, max, sum, zmuv, rank or none), then fused (sum, mnz, anz, max, min, wsum with '
    'weights, rrf with k, isr, log_isr, bordafuse); ranked by score, ties by docno descending. Float sums are '
    'taken in a fixed order (each list in rank order, the runs in the order given), so a score is the same bits '
    'under every plan. wsum''s weights must be finite (negative ones are allowed, as ranx). Nothing is stored.';

create or replace function ragsql.fuse(
    run text, runs text[], method text default 'rrf', norm text default 'min-max', weights float8[] default null,
    k integer default 60)
returns bigint
language plpgsql
as $$
declare
    dataset bigint;
    new_id bigint;
    versions bigint[] := '{}';
    name text;
    rid bigint;
begin
    if exists (select from ragsql.run as r where r.name = fuse.run) then
        raise exception 'run "%" already exists', run
            using errcode = 'unique_violation', hint = 'delete it first (ragsql delete run) or pick another name';
    end if;
    if coalesce(cardinality(runs), 0) < 2 then
        raise exception 'fusion needs two runs or more' using errcode = 'invalid_parameter_value';
    end if;
    dataset := ragsql._comparable_runs(runs[1], runs[2]);  -- ragsql.fused checks the rest; an error stores nothing
    -- each run's version by its key (one shard on Citus each), not in one query over all of them
    foreach name in array runs loop
        rid := ragsql._run_id(name);
        versions := versions || (select rr.version_id from ragsql.retrieval_run as rr where rr.run_id = rid);
    end loop;
    select array_agg(distinct v) into versions from unnest(versions) as v;
    if array_position(versions, null) is not null and cardinality(versions) > 1 then
        raise exception 'runs retrieved by ragsql from a corpus and imported runs do not fuse: their ids differ'
            using errcode = 'invalid_parameter_value';
    elsif cardinality(versions) > 1 then
        raise exception 'runs of different corpus versions do not fuse: their chunk ids differ'
            using errcode = 'invalid_parameter_value';
    end if;
    insert into ragsql.run (name, dataset_id, config)
    values (run, dataset, jsonb_build_object('fusion', jsonb_build_object(
        'runs', to_jsonb(runs), 'method', ragsql._fusion_method(method), 'norm', coalesce(norm, 'none'),
        'weights', to_jsonb(weights), 'k', k)))
    returning id into new_id;
    insert into ragsql.run_result (run_id, dataset_id, query_id, rank, docno, score)
    select new_id, dataset, q.id, f.rank, f.docno, f.score
    from ragsql.fused(runs, method, norm, weights, k) as f
    join ragsql.query as q on q.dataset_id = dataset and q.qid = f.qid;
    if versions[1] is not null then  -- the gold evidence of a corpus version maps onto the fused chunks too
        insert into ragsql.retrieval_run (run_id, version_id, mode, k, candidates, rrf_k)
        select new_id, versions[1], 'hybrid', greatest(coalesce(max(c), 1), 1), greatest(coalesce(max(c), 1), 1),
               greatest(k, 0)
        from (select count(*) as c from ragsql.run_result where run_id = new_id group by query_id) as per_query;
    end if;
    return new_id;
end
$$;
comment on function ragsql.fuse(text, text[], text, text, float8[], integer) is
    'Stores ragsql.fused(runs, method, norm, weights, k) as a new run of the runs'' dataset (config.fusion records '
    'how); returns its id. An existing run name, an unknown method, runs of two datasets or a weight count that '
    'is not the run count: one error, nothing stored.';
