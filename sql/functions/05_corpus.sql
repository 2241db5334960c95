-- Corpus building blocks: tokens for BM25, and gold evidence mapped onto the chunks of a corpus version.
-- Applied before 10_measure.sql, whose gold labels for retrieval runs come from ragsql.version_judgment.

create or replace function ragsql.ts_config(language text)
returns regconfig
language sql immutable parallel safe
as $$
    select case lower(coalesce(ts_config.language, ''))
        when 'en' then 'english'
        when 'de' then 'german'
        when 'fr' then 'french'
        when 'es' then 'spanish'
        when 'it' then 'italian'
        when 'pt' then 'portuguese'
        when 'nl' then 'dutch'
        when 'ru' then 'russian'
        when 'sv' then 'swedish'
        else 'simple'
    end::regconfig
$$;
comment on function ragsql.ts_config(text) is
    'The text search configuration that tokenises a space-delimited language for BM25 (simple when none fits). '
    'Chinese is segmented with jieba by the ingest instead.';

create or replace function ragsql.text_terms(content text, language text)
returns table (term text, tf integer)
language sql immutable parallel safe
as $$
    select t.lexeme, cardinality(t.positions)
    from unnest(to_tsvector(ragsql.ts_config(text_terms.language), coalesce(text_terms.content, ''))) as t
$$;
comment on function ragsql.text_terms(text, text) is
    'BM25 terms of a text in a space-delimited language and how often each occurs (lexemes of '
    'to_tsvector with the language''s configuration: lower-cased, stemmed, stop words removed).';

create or replace function ragsql.version_judgment(version_id bigint, dataset_id bigint)
returns table (query_id bigint, docno text, relevance integer, coarse boolean)
language plpgsql stable parallel safe
as $$
#variable_conflict use_column
begin
    return query
    with v as (
        select cv.id, cv.corpus_id from ragsql.corpus_version as cv where cv.id = version_judgment.version_id
    ),
    span as (
        -- spans and quotes of the dataset's queries, located in the corpus's documents
        select g.query_id, g.relevance, d.id as document_id,
               coalesce(g.start_char, strpos(d.text, g.quote) - 1) as s,
               coalesce(g.end_char, strpos(d.text, g.quote) - 1 + char_length(g.quote)) as e
        from ragsql.gold_span as g
        join ragsql.query as q on q.id = g.query_id and q.dataset_id = version_judgment.dataset_id
        join v on true
        join ragsql.document as d on d.corpus_id = v.corpus_id and d.doc_id = g.doc_id
    ),
    judged as (
        select j.query_id, j.docno, j.relevance, d.id as document_id
        from ragsql.judgment as j
        join ragsql.query as q on q.id = j.query_id and q.dataset_id = version_judgment.dataset_id
        left join (ragsql.document as d join v on d.corpus_id = v.corpus_id) on d.doc_id = j.docno
    ),
    mapped as (
        -- a chunk overlapping a span is relevant (a quote not found in its document maps to nothing)
        select sp.query_id, 'c' || c.id as docno, sp.relevance, false as coarse
        from span as sp
        join ragsql.chunk as c
          on c.version_id = version_judgment.version_id and c.document_id = sp.document_id
         and c.start_char < sp.e and c.end_char > sp.s
        where sp.s >= 0
        union all
        -- a judgment naming a document: every chunk of it (coarse: it overestimates retrieval)
        select jd.query_id, 'c' || c.id, jd.relevance, true
        from judged as jd
        join ragsql.chunk as c on c.version_id = version_judgment.version_id and c.document_id = jd.document_id
        union all
        -- any other judgment (a chunk id c<id>, an external docno) as it is
        select jd.query_id, jd.docno, jd.relevance, false
        from judged as jd
        where jd.document_id is null
    )
    select m.query_id, m.docno, max(m.relevance)::integer, bool_and(m.coarse)
    from mapped as m
    group by m.query_id, m.docno;
end
$$;
comment on function ragsql.version_judgment(bigint, bigint) is
    'Gold labels of a dataset''s queries on the chunks (docno c<id>) of a corpus version: a chunk overlapping a '
    'gold span or quote is relevant; a judgment naming a document makes all its chunks relevant (coarse = true: '
    'document-level gold overestimates retrieval); other judgments are kept as they are. Evidence that maps onto '
    'nothing is listed by ragsql.run_unmatched_gold.';
