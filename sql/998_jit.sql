-- No JIT inside ragsql's functions that read tables: the PL/pgSQL ones that are not immutable (see the
-- README's "One SQL source for both layouts"; an immutable or `language sql` helper gets no setting, so it
-- can still be inlined). A set-returning function is estimated at 1000 rows, so a query composed of a few
-- (summarize over measure over _evaluate ...) is estimated at millions of rows, passes jit_above_cost, and
-- on a server built with LLVM (Debian's PostgreSQL, the Citus packages) spends ~0.5 s compiling per statement
-- for a query that runs in milliseconds (measured: bench/jit.py, README "JIT"). The setting is per function
-- (`alter function ... set jit = off`), so a session's own queries keep the server's JIT; `create or replace`
-- drops it, hence this file runs on every install, after the functions.
do $$
declare
    f regprocedure;
begin
    for f in
        select p.oid::regprocedure
        from pg_proc p
        join pg_namespace n on n.oid = p.pronamespace
        where n.nspname in ('ragsql', 'ragsql_report')
          and p.prokind = 'f'
          and p.prolang = (select oid from pg_language where lanname = 'plpgsql')
          and p.provolatile <> 'i'
          and not coalesce('jit=off' = any(p.proconfig), false)
    loop
        execute format('alter function %s set jit = off', f);
    end loop;
end
$$;
