-- Partitions and their ownership (croupier.ledger.partitions). The partition count is
-- fixed when the ledger is created: ``migrate`` inserts the one row of ledger_partitions
-- and one lease row per partition; the row is insert-only like the ledger, and a second
-- row is impossible (the key is the constant true).
CREATE TABLE ledger_partitions (
    fixed      boolean     PRIMARY KEY DEFAULT true CHECK (fixed),
    count      integer     NOT NULL CHECK (count BETWEEN 1 AND 4096),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER ledger_partitions_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
    ON ledger_partitions FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Who may append for a partition's tables: the owner of an unexpired lease, at its epoch.
-- Not ledger data: rows are updated in place (by the database's clock). Every append that
-- names a fence locks its rows shared until it commits.
CREATE TABLE partition_leases (
    partition  integer     PRIMARY KEY CHECK (partition >= 0),
    owner      text,
    epoch      bigint      NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    expires_at timestamptz NOT NULL DEFAULT 'epoch'
);

-- An epoch never goes back, and a partition changes hands (to an owner) only with a new
-- epoch: an instance that held it at an older epoch is refused whatever happens to the row.
CREATE FUNCTION partition_lease_epoch_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.partition <> OLD.partition OR NEW.epoch < OLD.epoch
       OR (NEW.owner IS NOT NULL AND NEW.owner IS DISTINCT FROM OLD.owner
           AND NEW.epoch <= OLD.epoch) THEN
        RAISE EXCEPTION 'partition lease %: an owner change needs a new epoch (% -> %)',
            OLD.partition, OLD.epoch, NEW.epoch USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER partition_leases_epoch BEFORE UPDATE ON partition_leases
    FOR EACH ROW EXECUTE FUNCTION partition_lease_epoch_check();
CREATE TRIGGER partition_leases_no_delete BEFORE DELETE OR TRUNCATE ON partition_leases
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- The instances sharing the partitions: each seen at its last registration, and live
-- until its term from then has passed.
CREATE TABLE instances (
    id         text        PRIMARY KEY,
    seen_at    timestamptz NOT NULL,
    live_until timestamptz NOT NULL
);

REVOKE ALL ON ledger_partitions, partition_leases, instances FROM PUBLIC;
GRANT SELECT ON ledger_partitions TO croupier_app;
GRANT SELECT, UPDATE ON partition_leases TO croupier_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON instances TO croupier_app;
