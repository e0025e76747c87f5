-- Partitions and their ownership (see the PostgreSQL migration): the count fixed when the
-- ledger is created (insert-only, one row), a lease per partition (updated in place;
-- expires_at in Unix seconds), the instances sharing them.

CREATE TABLE ledger_partitions (
    fixed      INTEGER PRIMARY KEY DEFAULT 1 CHECK (fixed = 1),
    count      INTEGER NOT NULL CHECK (count BETWEEN 1 AND 4096),
    created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TRIGGER ledger_partitions_no_update BEFORE UPDATE ON ledger_partitions
BEGIN SELECT RAISE(ABORT, 'ledger table ledger_partitions is append-only: UPDATE refused'); END;

CREATE TRIGGER ledger_partitions_no_delete BEFORE DELETE ON ledger_partitions
BEGIN SELECT RAISE(ABORT, 'ledger table ledger_partitions is append-only: DELETE refused'); END;

CREATE TABLE partition_leases (
    partition  INTEGER PRIMARY KEY CHECK (partition >= 0),
    owner      TEXT,
    epoch      INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    expires_at REAL    NOT NULL DEFAULT 0
);

CREATE TRIGGER partition_leases_epoch BEFORE UPDATE ON partition_leases
WHEN NEW.partition <> OLD.partition OR NEW.epoch < OLD.epoch
    OR (NEW.owner IS NOT NULL AND NEW.owner IS NOT OLD.owner AND NEW.epoch <= OLD.epoch)
BEGIN SELECT RAISE(ABORT, 'partition lease: an owner change needs a new epoch'); END;

CREATE TRIGGER partition_leases_no_delete BEFORE DELETE ON partition_leases
BEGIN SELECT RAISE(ABORT, 'partition leases are never deleted'); END;

CREATE TABLE instances (
    id         TEXT PRIMARY KEY,
    seen_at    REAL NOT NULL,
    live_until REAL NOT NULL
);
