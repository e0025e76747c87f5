-- Each signed head also claims how far the outbox was published when it was signed: every
-- outbox row with seq <= published has a publish marker (or a set-aside row) by then. The
-- head's signature covers the claim, so publish marks deleted below it are provable
-- (verify), and the relay does not take their messages for unpublished. NULL on heads
-- signed before this migration (their signature covers position and hash only).
ALTER TABLE ledger_heads ADD COLUMN published BIGINT;
