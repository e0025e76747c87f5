-- Outbox messages the broker refused for good (unroutable, too long, nacked): set aside
-- with the reason, so they no longer block the relay. Insert-only like the other markers;
-- a set-aside message that is published after all (croupier redrive --results) gets its
-- outbox_published row as usual.
CREATE TABLE outbox_set_aside (
    message_id   text        PRIMARY KEY REFERENCES outbox (message_id),
    reason       text        NOT NULL,
    set_aside_at timestamptz NOT NULL DEFAULT now()
);

CREATE TRIGGER outbox_set_aside_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
    ON outbox_set_aside FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Who relays the outbox: a lease its holder renews; another instance takes it once it has
-- expired. Not ledger data: rows are updated in place.
CREATE TABLE relay_lease (
    name       text        PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);

REVOKE ALL ON outbox_set_aside, relay_lease FROM PUBLIC;
GRANT SELECT, INSERT ON outbox_set_aside TO croupier_app;
GRANT SELECT, INSERT, UPDATE ON relay_lease TO croupier_app;
