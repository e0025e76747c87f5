-- Where the search for open streams (``Ledger.open_streams``: rounds not settled or voided)
-- starts, so that its cost follows the streams begun since the oldest open one, not the
-- ledger's size. A row says: every stream of ``scope`` whose first event is below
-- ``position`` had a closing event when the row was written; closed streams stay closed,
-- so the highest row holds from then on. Insert-only, like the ledger; a row set too high
-- would only hide open rounds from the search, never change a fact.
CREATE TABLE open_floor (
    scope       text        NOT NULL,
    position    bigint      NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX open_floor_scope_position ON open_floor (scope, position);

CREATE TRIGGER open_floor_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
    ON open_floor FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

REVOKE ALL ON open_floor FROM PUBLIC;
GRANT SELECT, INSERT ON open_floor TO croupier_app;
