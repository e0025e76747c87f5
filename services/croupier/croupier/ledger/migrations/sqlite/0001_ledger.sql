-- The ledger: events (hash-chained), outbox, publish markers. Insert-only: triggers refuse
-- UPDATE and DELETE on every table (SQLite has no TRUNCATE; a bare DELETE fires them too).

CREATE TABLE events (
    position    INTEGER PRIMARY KEY CHECK (position > 0),
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL,   -- canonical JSON, exactly the text the hash covers
    key         TEXT    NOT NULL UNIQUE,
    recorded_at TEXT    NOT NULL,   -- YYYY-MM-DDTHH:MM:SS.ffffffZ
    prev_hash   TEXT    NOT NULL,
    hash        TEXT    NOT NULL,
    UNIQUE (stream, version)
);

-- Outbox rows are never updated: publishing inserts into outbox_published.
CREATE TABLE outbox (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id  TEXT    NOT NULL UNIQUE,
    position    INTEGER NOT NULL,
    exchange    TEXT    NOT NULL,
    routing_key TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE outbox_published (
    message_id   TEXT PRIMARY KEY REFERENCES outbox (message_id),
    published_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'ledger table events is append-only: UPDATE refused'); END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'ledger table events is append-only: DELETE refused'); END;

CREATE TRIGGER outbox_no_update BEFORE UPDATE ON outbox
BEGIN SELECT RAISE(ABORT, 'ledger table outbox is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_no_delete BEFORE DELETE ON outbox
BEGIN SELECT RAISE(ABORT, 'ledger table outbox is append-only: DELETE refused'); END;

CREATE TRIGGER outbox_published_no_update BEFORE UPDATE ON outbox_published
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_published is append-only: UPDATE refused'); END;

CREATE TRIGGER outbox_published_no_delete BEFORE DELETE ON outbox_published
BEGIN SELECT RAISE(ABORT, 'ledger table outbox_published is append-only: DELETE refused'); END;
