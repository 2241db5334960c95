-- Gold evidence that matches nothing: a span naming a document the corpus lacks, a quote not found in its
-- document, a judgment naming neither a document nor a chunk. Such evidence silently leaves a query out of every
-- measure (or lowers its recall for good), so import, retrieve and metrics report it from these functions.
-- Only evidence with a positive grade is checked: a non-relevant label that matches nothing changes no value.

create or replace function ragsql._unmatched_gold(dataset_id bigint, corpus_id bigint, version_id bigint)
returns table (query_id bigint, kind text, evidence text, reason text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    with scope as (
        select c.name as corpus
        from (select 1) as one
        left join ragsql.corpus as c on c.id = _unmatched_gold.corpus_id
    ),
    span as (
        select g.query_id, g.position, g.doc_id, g.start_char, g.end_char, g.quote
        from ragsql.gold_span as g
        join ragsql.query as q on q.id = g.query_id and q.dataset_id = _unmatched_gold.dataset_id
        where g.relevance > 0
    ),
    span_match as (
        -- per span: documents of that id in scope, those the span lies inside, those with a chunk over it
        select sp.query_id, sp.position, min(sp.doc_id) as doc_id, min(sp.start_char) as start_char,
               min(sp.end_char) as end_char, min(sp.quote) as quote,
               count(d.id) as documents,
               count(d.id) filter (where x.s >= 0 and x.s < char_length(d.text)) as located,
               count(d.id) filter (where exists (
                   select from ragsql.chunk as c
                   where c.version_id = _unmatched_gold.version_id and c.document_id = d.id
                     and c.start_char < x.e and c.end_char > x.s)) as chunked
        from span as sp
        left join ragsql.document as d
          on d.doc_id = sp.doc_id
         and (_unmatched_gold.corpus_id is null or d.corpus_id = _unmatched_gold.corpus_id)
        left join lateral (
            select coalesce(sp.start_char, strpos(d.text, sp.quote) - 1) as s,
                   coalesce(sp.end_char, strpos(d.text, sp.quote) - 1 + char_length(sp.quote)) as e
        ) as x on true
        group by sp.query_id, sp.position
    ),
    judged as (
        select j.query_id, j.docno,
               case when j.docno ~ '^c[0-9]{1,18}$' then substr(j.docno, 2)::bigint end as chunk_id
        from ragsql.judgment as j
        join ragsql.query as q on q.id = j.query_id and q.dataset_id = _unmatched_gold.dataset_id
        where j.relevance > 0
          -- without a corpus only a chunk id can be checked: any other docno may name an external item
          and (_unmatched_gold.corpus_id is not null or j.docno ~ '^c[0-9]{1,18}$')
    ),
    judged_match as (
        select jd.query_id, jd.docno, jd.chunk_id,
               d.id as document_id,
               d.id is not null and exists (
                   select from ragsql.chunk as c
                   where c.version_id = _unmatched_gold.version_id and c.document_id = d.id) as chunked,
               exists (
                   select from ragsql.chunk as c
                   join ragsql.corpus_version as v on v.id = c.version_id
                   where c.id = jd.chunk_id
                     and (_unmatched_gold.corpus_id is null or v.corpus_id = _unmatched_gold.corpus_id)) as chunk_known,
               exists (
                   select from ragsql.chunk as c
                   where c.id = jd.chunk_id and c.version_id = _unmatched_gold.version_id) as chunk_in_version
        from judged as jd
        left join ragsql.document as d on d.corpus_id = _unmatched_gold.corpus_id and d.doc_id = jd.docno
    )
    select m.query_id,
           'span',
           m.doc_id,
           case
               when m.documents = 0 and s.corpus is null then format('no document "%s" in any corpus', m.doc_id)
               when m.documents = 0 then format('no document "%s" in corpus "%s"', m.doc_id, s.corpus)
               when m.located = 0 and m.start_char is not null
                   then format('span [%s, %s) lies beyond the end of document "%s"', m.start_char, m.end_char,
                               m.doc_id)
               when m.located = 0 and m.quote is not null
                   then format('quote "%s" not found in document "%s"',
                               left(m.quote, 40) || case when char_length(m.quote) > 40 then '…' else '' end,
                               m.doc_id)
               when m.located = 0 then 'a span with neither offsets nor a quote'
               else format('no chunk of corpus version %s overlaps the span of document "%s"',
                           _unmatched_gold.version_id, m.doc_id)
           end
    from span_match as m
    cross join scope as s
    where m.documents = 0 or m.located = 0 or (_unmatched_gold.version_id is not null and m.chunked = 0)
    union all
    select m.query_id,
           'judgment',
           m.docno,
           case
               when m.document_id is not null
                   then format('document "%s" has no chunk in corpus version %s', m.docno, _unmatched_gold.version_id)
               when m.chunk_known
                   then format('chunk %s is not in corpus version %s', m.docno, _unmatched_gold.version_id)
               when s.corpus is null then format('no chunk %s in any corpus', m.docno)
               else format('no document or chunk "%s" in corpus "%s"', m.docno, s.corpus)
           end
    from judged_match as m
    cross join scope as s
    where case
        when m.document_id is not null then _unmatched_gold.version_id is not null and not m.chunked
        when _unmatched_gold.version_id is not null then not m.chunk_in_version
        else not m.chunk_known
    end;
end
$$;
comment on function ragsql._unmatched_gold(bigint, bigint, bigint) is
    'Gold evidence (positive grade) of a dataset that matches nothing in a corpus (every corpus when null) or, '
    'with version_id, in that corpus version.';

create or replace function ragsql._dataset_id(dataset text)
returns bigint
language plpgsql stable parallel safe
as $$
begin
    return ragsql._known((select d.id from ragsql.dataset as d where d.name = _dataset_id.dataset), 'dataset',
                         dataset, 'see: select name from ragsql.dataset');
end
$$;
comment on function ragsql._dataset_id(text) is 'Id of the named dataset; raises no_data_found for an unknown one.';

create or replace function ragsql._corpus_id(corpus text)
returns bigint
language plpgsql stable parallel safe
as $$
begin
    if corpus is null then
        return null;
    end if;
    return ragsql._known((select c.id from ragsql.corpus as c where c.name = _corpus_id.corpus), 'corpus',
                         corpus, 'see: select name from ragsql.corpus');
end
$$;
comment on function ragsql._corpus_id(text) is
    'Id of the named corpus (null for null); no_data_found for an unknown one.';

create or replace function ragsql.dataset_unmatched_gold(dataset text, corpus text default null)
returns table (qid text, kind text, evidence text, reason text)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    select q.qid, u.kind, u.evidence, u.reason
    from ragsql._unmatched_gold(
        ragsql._dataset_id(dataset_unmatched_gold.dataset), ragsql._corpus_id(dataset_unmatched_gold.corpus), null
    ) as u
    join ragsql.query as q on q.id = u.query_id
    order by q.qid collate "C", u.kind desc, u.evidence, u.reason;
end
$$;
comment on function ragsql.dataset_unmatched_gold(text, text) is
    'Gold evidence of a dataset (grade > 0) that matches nothing in a corpus: a span or quote whose document the '
    'corpus lacks, a quote not found in its document, a span beyond its end, a judgment naming neither a '
    'document (doc_id) nor a chunk (c<id>) of the corpus. Without a corpus: spans whose document no corpus holds '
    'and chunk ids no corpus holds (other docnos may name external items and are not checked).';

create or replace function ragsql.run_unmatched_gold(run text)
returns table (qid text, kind text, evidence text, reason text, dropped boolean)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
declare
    rid bigint := ragsql._run_id(run_unmatched_gold.run);
    version bigint;
begin
    -- the run's own row first, by its key (one shard on Citus); the query below reads no run-scoped table
    select rr.version_id into version from ragsql.retrieval_run as rr where rr.run_id = rid;
    return query
    with ru as materialized (
        select r.id, r.dataset_id, v.id as version_id, v.corpus_id
        from ragsql.run as r
        left join ragsql.corpus_version as v on v.id = version
        where r.id = rid
    ),
    unmatched as (
        -- a retrieval run: the evidence that maps onto no chunk of its corpus version
        select u.query_id, u.kind, u.evidence, u.reason
        from ru
        cross join lateral ragsql._unmatched_gold(ru.dataset_id, ru.corpus_id, ru.version_id) as u
        where ru.version_id is not null
        union all
        -- an imported run is judged on judgments only: its dataset's spans map onto nothing
        select g.query_id, 'span', g.doc_id,
               'gold spans count only for runs retrieved from a corpus (ragsql retrieve); this run was imported'
        from ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        join ragsql.gold_span as g on g.query_id = q.id
        where ru.version_id is null and g.relevance > 0
    ),
    judged as materialized (
        -- the queries the measures cover (as ragsql._evaluate reads them)
        select j.query_id
        from ru
        join ragsql.query as q on q.dataset_id = ru.dataset_id
        join ragsql.judgment as j on j.query_id = q.id
        where ru.version_id is null
        union
        select vj.query_id
        from ru
        cross join lateral ragsql.version_judgment(ru.version_id, ru.dataset_id) as vj
        where ru.version_id is not null
    )
    select q.qid, u.kind, u.evidence, u.reason,
           not exists (select from judged as j where j.query_id = u.query_id)
    from unmatched as u
    join ragsql.query as q on q.id = u.query_id
    order by q.qid collate "C", u.kind desc, u.evidence, u.reason;
end
$$;
comment on function ragsql.run_unmatched_gold(text) is
    'Gold evidence (grade > 0) of a run''s dataset that matches nothing the run is judged on: for a run of '
    'ragsql retrieve, a span, quote or judgment that maps onto no chunk of its corpus version (a document the '
    'corpus lacks, a quote not found, a document not chunked in the version, a chunk of another version, an '
    'external docno); for an imported run, every gold span (imported runs are judged on judgments only). '
    'dropped = the query has no gold left at all, so every measure leaves it out.';
