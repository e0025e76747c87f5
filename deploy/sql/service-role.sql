-- The service's login role, by hand: what `croupier migrate --service-role NAME` does.
-- Run as the ledger's owner, in the ledger's database, AFTER `croupier migrate` (which
-- creates the group role croupier_app with INSERT and SELECT on the ledger's tables):
--
--   psql "$OWNER_URL" -v role=croupier_service -v password="$SECRET" -f service-role.sql
--
-- The role can log in and has croupier_app's rights, nothing more: it cannot UPDATE,
-- DELETE or TRUNCATE, disable triggers, create objects, or migrate. Point the service at it:
-- CROUPIER_DATABASE_URL=postgresql://croupier_service:SECRET@HOST:5432/croupier

CREATE ROLE :"role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT NOREPLICATION NOBYPASSRLS
    IN ROLE croupier_app PASSWORD :'password';
