-- As PostgreSQL's 0004: set-aside rows are signed (key_id, signature) and may repeat a
-- message id. SQLite cannot drop a primary key: the table is rebuilt, its rows kept.

CREATE TABLE outbox_set_aside_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id   TEXT NOT NULL REFERENCES outbox (message_id),
    reason       TEXT NOT NULL,
    set_aside_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    key_id       TEXT,
    signature    TEXT
);

INSERT INTO outbox_set_aside_new (message_id, reason, set_aside_at)
SELECT message_id, reason, set_aside_at FROM outbox_set_aside ORDER BY rowid;

DROP TABLE outbox_set_aside;
ALTER TABLE outbox_set_aside_new RENAME TO outbox_set_aside;
CREATE INDEX outbox_set_aside_message ON outbox_set_aside (message_id);

CREATE TRIGGER outbox_set_aside_no_update BEFORE UPDATE ON outbox_set_aside
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_set_aside is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_set_aside_no_delete BEFORE DELETE ON outbox_set_aside
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_set_aside is append-only: DELETE refused'); END;
