-- Where the search for open streams starts (see the PostgreSQL migration): every stream of
-- ``scope`` whose first event is below ``position`` was closed when the row was written.
-- Insert-only.

CREATE TABLE open_floor (
    scope       TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    recorded_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX open_floor_scope_position ON open_floor (scope, position);

CREATE TRIGGER open_floor_no_update BEFORE UPDATE ON open_floor
BEGIN SELECT RAISE(ABORT, 'ledger table open_floor is append-only: UPDATE refused'); END;

CREATE TRIGGER open_floor_no_delete BEFORE DELETE ON open_floor
BEGIN SELECT RAISE(ABORT, 'ledger table open_floor is append-only: DELETE refused'); END;
