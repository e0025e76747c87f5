-- Outbox messages the broker refused for good, set aside with the reason (insert-only),
-- and the relay lease (updated in place; expires_at in Unix seconds).

CREATE TABLE outbox_set_aside (
    message_id   TEXT PRIMARY KEY REFERENCES outbox (message_id),
    reason       TEXT NOT NULL,
    set_aside_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TRIGGER outbox_set_aside_no_update BEFORE UPDATE ON outbox_set_aside
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_set_aside is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_set_aside_no_delete BEFORE DELETE ON outbox_set_aside
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_set_aside is append-only: DELETE refused'); END;

CREATE TABLE relay_lease (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at REAL NOT NULL
);
