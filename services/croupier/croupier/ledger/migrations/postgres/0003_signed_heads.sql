-- The ledger's integrity reaches the outbox and the publish markers, and heads are signed.
--
-- * outbox rows name the chained event they report by position AND hash (event_hash);
-- * publish markers belong to a signed mark (outbox_marks: the message ids, an Ed25519
--   signature); a marker without a valid mark is ignored by the relay and reported by
--   verify. A marker no longer owns its message id, so a forged one cannot block the real;
-- * ledger_heads: the (position, hash) of each committed batch's last event, signed with
--   the service's key. Several rows may name one position (a forged one cannot block ours);
-- * schema_migrations is append-only like every ledger table.
-- The service role croupier_app may INSERT and SELECT, nothing else, on every new table.

CREATE TRIGGER schema_migrations_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
    ON schema_migrations FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

ALTER TABLE outbox ADD COLUMN event_hash text;
ALTER TABLE outbox DISABLE TRIGGER outbox_append_only;
UPDATE outbox SET event_hash = coalesce(
    (SELECT e.hash FROM events e WHERE e.position = outbox.position), repeat('0', 64));
ALTER TABLE outbox ENABLE TRIGGER outbox_append_only;
ALTER TABLE outbox ALTER COLUMN event_hash SET NOT NULL;
CREATE INDEX outbox_position ON outbox (position);

CREATE TABLE outbox_marks (
    mark        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_ids json        NOT NULL,  -- canonical JSON array: the text the signature covers
    key_id      text        NOT NULL,
    signature   text        NOT NULL,
    marked_at   timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE outbox_published DROP CONSTRAINT outbox_published_pkey;
ALTER TABLE outbox_published ADD COLUMN mark bigint REFERENCES outbox_marks (mark);
CREATE UNIQUE INDEX outbox_published_message_mark ON outbox_published (message_id, mark);

CREATE TABLE ledger_heads (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    position    bigint      NOT NULL,
    hash        text        NOT NULL,
    key_id      text        NOT NULL,
    signature   text        NOT NULL,
    signed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_heads_position ON ledger_heads (position);

CREATE TRIGGER outbox_marks_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON outbox_marks
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER ledger_heads_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ledger_heads
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

REVOKE ALL ON outbox_marks, ledger_heads FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT SELECT, INSERT ON outbox_marks, ledger_heads TO croupier_app;
