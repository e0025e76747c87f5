-- Set-aside rows are signed like publish marks: the service's key over (message_id,
-- reason) in key_id and signature (NULL for rows written before, or without a key). A row
-- the key did not sign is reported by verify and never listed for `croupier redrive
-- --results`. message_id is no longer the key, so a forged row cannot keep the service's
-- own from being written.

ALTER TABLE outbox_set_aside DROP CONSTRAINT outbox_set_aside_pkey;
ALTER TABLE outbox_set_aside ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;
ALTER TABLE outbox_set_aside ADD COLUMN key_id text, ADD COLUMN signature text;
CREATE INDEX outbox_set_aside_message ON outbox_set_aside (message_id);
