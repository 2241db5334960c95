-- Read access for analysts: members of ragsql_reader can select every table and view and call
-- every function. The role is created only where the installing user may create roles.
do $$
begin
    if not exists (select from pg_roles where rolname = 'ragsql_reader') then
        if (select rolcreaterole or rolsuper from pg_roles where rolname = current_user) then
            create role ragsql_reader nologin;
        else
            raise notice 'role ragsql_reader not created: % may not create roles', current_user;
            return;
        end if;
    end if;
    grant usage on schema ragsql to ragsql_reader;
    grant usage on schema ragsql_intarray to ragsql_reader;
    grant select on all tables in schema ragsql to ragsql_reader;
    grant execute on all functions in schema ragsql to ragsql_reader;
end
$$;
