-- As PostgreSQL's 0002: outbox rows name their event's hash, publish markers belong to a
-- signed mark, signed ledger heads, and schema_migrations is append-only. SQLite has no
-- roles: who may write the file is up to its permissions.

CREATE TRIGGER schema_migrations_no_update BEFORE UPDATE ON schema_migrations
BEGIN SELECT RAISE(ABORT, 'ledger table schema_migrations is append-only: UPDATE refused'); END;

CREATE TRIGGER schema_migrations_no_delete BEFORE DELETE ON schema_migrations
BEGIN SELECT RAISE(ABORT, 'ledger table schema_migrations is append-only: DELETE refused'); END;

-- The backfill needs UPDATE, which the outbox trigger refuses: it steps aside for it.
ALTER TABLE outbox ADD COLUMN event_hash TEXT NOT NULL DEFAULT '';
DROP TRIGGER outbox_no_update;
UPDATE outbox SET event_hash = coalesce(
    (SELECT e.hash FROM events e WHERE e.position = outbox.position),
    '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TRIGGER outbox_no_update BEFORE UPDATE ON outbox
BEGIN SELECT RAISE(ABORT, 'ledger table outbox is append-only: UPDATE refused'); END;
CREATE INDEX outbox_position ON outbox (position);

CREATE TABLE outbox_marks (
    mark        INTEGER PRIMARY KEY AUTOINCREMENT,
    message_ids TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    signature   TEXT NOT NULL,
    marked_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE outbox_published_new (
    message_id   TEXT NOT NULL REFERENCES outbox (message_id),
    mark         INTEGER REFERENCES outbox_marks (mark),
    published_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (message_id, mark)
);

INSERT INTO outbox_published_new (message_id, published_at)
SELECT message_id, published_at FROM outbox_published;

DROP TABLE outbox_published;
ALTER TABLE outbox_published_new RENAME TO outbox_published;

CREATE TABLE ledger_heads (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    position    INTEGER NOT NULL,
    hash        TEXT    NOT NULL,
    key_id      TEXT    NOT NULL,
    signature   TEXT    NOT NULL,
    signed_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX ledger_heads_position ON ledger_heads (position);

CREATE TRIGGER outbox_published_no_update BEFORE UPDATE ON outbox_published
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_published is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_published_no_delete BEFORE DELETE ON outbox_published
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_published is append-only: DELETE refused'); END;

CREATE TRIGGER outbox_marks_no_update BEFORE UPDATE ON outbox_marks
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_marks is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_marks_no_delete BEFORE DELETE ON outbox_marks
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_marks is append-only: DELETE refused'); END;

CREATE TRIGGER ledger_heads_no_update BEFORE UPDATE ON ledger_heads
BEGIN SELECT RAISE(ABORT, 'ledger table ledger_heads is append-only: UPDATE refused'); END;

CREATE TRIGGER ledger_heads_no_delete BEFORE DELETE ON ledger_heads
BEGIN SELECT RAISE(ABORT, 'ledger table ledger_heads is append-only: DELETE refused'); END;
