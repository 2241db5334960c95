-- Schema ragsql_report: the metric, diagnostic and comparison API of role ragsql_reader, who may not read
-- raw text (documents, chunks, answers, judge replies: see sql/999_grants.sql).
--
-- Why wrappers: the metric functions are `language sql` and get inlined into the caller's query, so they
-- read ragsql's tables with the caller's rights, answer and document text included (text_hash(answer.text)
-- finds an answer's statements; gold quotes are located in document.text). Made security definer they would
-- no longer inline (STYLE.md), so each function here is a security definer wrapper of its ragsql namesake,
-- generated from the catalog so that its arguments, defaults and result always match, and the views call
-- the wrappers. What they return holds numbers, ids, names, labels and reasons, never raw text. Granted to
-- ragsql_reader and ragsql_writer in sql/999_grants.sql.

create schema if not exists ragsql_report;
comment on schema ragsql_report is
    'ragsql''s metrics, diagnostics and comparisons for ragsql_reader: security definer wrappers of the ragsql '
    'functions of the same name, and the views ragsql.query_measure, run_measure, query_generation and '
    'run_generation over them. Set search_path = ragsql_report, ragsql to use the same names.';

do $$
declare
    -- every metric's own function, as the registry declares them (ragsql._metric_functions), and these
    wrapped text[] := ragsql._metric_functions() || array[
        'measure', 'evaluate', 'summarize',
        'evaluate_generation', 'generation_measure', 'summarize_generation',
        'diagnose_queries', 'diagnose_run',
        'compare', 'compare_queries', 'measure_ci', 'bootstrap_mean_ci', 'sign_flip_p', 'paired_t_p', 'holm',
        'higher_is_better', 'is_offline_judge', 'run_config', 'run_config_diff', 'measure_alias', 'check', 'history', 'query_values', 'judge_agreement', 'ppi_mean', 'cohen_kappa', 'spearman',
        'kendall_tau', 'review_sample', 'judge_repeats', 'judge_flips', 'judge_consistency', 'ppi_compare',
        'fused'];
    -- Only schemas no caller may create in, pg_temp last (PostgreSQL's "Writing SECURITY DEFINER Functions
    -- Safely"): the wrapped functions' bodies run on this path with the owner's rights, and a schema anyone may
    -- create in (public on PostgreSQL 14, where pgvector usually is) would let a caller's public.unnest(float8[])
    -- or public.||(text, bigint) run instead of pg_catalog's. ragsql's names are qualified; the functions that
    -- use pgvector bind it when they are created (SQL-standard bodies, sql/functions/20_generation.sql and
    -- 50_compare.sql), so pgvector's schema is not needed here.
    path constant text := 'pg_catalog, pg_temp';
    mirrored text[] := array['query_measure', 'run_measure', 'query_generation', 'run_generation', 'run_measure_ci',
                              'run_history', 'judge_confusion', 'reviewer_agreement', 'watch_metrics'];
    f record;
    v text;
    def text;
    stale regprocedure[];
    proc regprocedure;
begin
    -- a wrapper whose original changed its result or went away is dropped (with the views over it)
    select coalesce(array_agg(w.oid::regprocedure), '{}') into stale
    from pg_proc as w
    where w.pronamespace = 'ragsql_report'::regnamespace
      and not exists (select from pg_proc as p
                      where p.pronamespace = 'ragsql'::regnamespace and p.proname = w.proname
                        and p.proname = any (wrapped)
                        and pg_get_function_arguments(p.oid) = pg_get_function_arguments(w.oid)
                        and pg_get_function_result(p.oid) = pg_get_function_result(w.oid));
    if cardinality(stale) > 0 then
        drop view if exists ragsql_report.query_measure, ragsql_report.run_measure,
            ragsql_report.query_generation, ragsql_report.run_generation, ragsql_report.run_measure_ci,
            ragsql_report.run_history, ragsql_report.judge_confusion, ragsql_report.reviewer_agreement,
            ragsql_report.watch_metrics;
        foreach proc in array stale loop
            execute format('drop function %s', proc);
        end loop;
    end if;
    for f in
        select p.oid, p.proname,
               pg_get_function_arguments(p.oid) as args,
               pg_get_function_identity_arguments(p.oid) as ident,
               pg_get_function_result(p.oid) as result,
               (select string_agg('$' || i, ', ' order by i) from generate_series(1, p.pronargs) as i) as params,
               obj_description(p.oid, 'pg_proc') as comment
        from pg_proc as p
        where p.pronamespace = 'ragsql'::regnamespace and p.proname = any (wrapped)
        order by p.proname, p.oid::regprocedure::text
    loop
        execute format(
            'create or replace function ragsql_report.%I(%s) returns %s language sql stable '
            'security definer set search_path = %s as %L',
            f.proname, f.args, f.result, path,
            format('select * from ragsql.%I(%s)', f.proname, coalesce(f.params, '')));
        execute format('comment on function ragsql_report.%I(%s) is %L', f.proname, f.ident,
                       'ragsql.' || f.proname || ' for ragsql_reader (security definer): ' || coalesce(f.comment, ''));
    end loop;
    -- the views: ragsql's, calling the wrappers instead of the functions they wrap
    foreach v in array mirrored loop
        def := regexp_replace(pg_get_viewdef(format('ragsql.%I', v)::regclass),
                              '\mragsql\.(' || array_to_string(wrapped, '|') || ')\(', 'ragsql_report.\1(', 'g');
        if def is distinct from (select pg_get_viewdef(c.oid) from pg_class as c
                                 where c.relnamespace = 'ragsql_report'::regnamespace and c.relname = v) then
            execute format('drop view if exists ragsql_report.%I', v);
            execute format('create view ragsql_report.%I as %s', v, def);
        end if;
        execute format('comment on view ragsql_report.%I is %L', v,
                       'ragsql.' || v || ' for ragsql_reader: ' || obj_description(format('ragsql.%I', v)::regclass));
    end loop;
end
$$;
