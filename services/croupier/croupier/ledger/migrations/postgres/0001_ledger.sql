-- The ledger: events (hash-chained), outbox, publish markers. Insert-only: statement
-- triggers refuse UPDATE, DELETE and TRUNCATE for every role (the owner included, until it
-- disables them, which verify() would then expose), and the service role croupier_app is
-- granted INSERT and SELECT only. Migrations run as the owner; the service runs as (a
-- member of) croupier_app.

CREATE TABLE events (
    position    bigint      PRIMARY KEY CHECK (position > 0),
    stream      text        NOT NULL,
    version     integer     NOT NULL CHECK (version > 0),
    type        text        NOT NULL,
    data        json        NOT NULL,  -- json (not jsonb) keeps the exact canonical text hashed
    key         text        NOT NULL,
    recorded_at timestamptz NOT NULL,
    prev_hash   text        NOT NULL,
    hash        text        NOT NULL,
    CONSTRAINT events_key_unique UNIQUE (key),
    CONSTRAINT events_stream_version_unique UNIQUE (stream, version)
);

-- Outbox rows are never updated: publishing inserts into outbox_published.
CREATE TABLE outbox (
    seq         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id  text        NOT NULL UNIQUE,
    position    bigint      NOT NULL,
    exchange    text        NOT NULL,
    routing_key text        NOT NULL,
    body        json        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE outbox_published (
    message_id   text        PRIMARY KEY REFERENCES outbox (message_id),
    published_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger table % is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER outbox_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER outbox_published_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
    ON outbox_published FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Roles are cluster-wide: another database (or a concurrent migrate) may have made it.
DO $$
BEGIN
    CREATE ROLE croupier_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

REVOKE ALL ON events, outbox, outbox_published, schema_migrations FROM PUBLIC;
GRANT SELECT, INSERT ON events, outbox, outbox_published TO croupier_app;
GRANT SELECT ON schema_migrations TO croupier_app;
