-- A session holding the append lock whose client went silent in the middle of an exchange
-- is ended by none of the server's own limits: idle_in_transaction_session_timeout runs
-- only once the server has answered a Sync, so a client cut off between a statement's Bind
-- and its Sync (or one that stopped reading a result) leaves the server waiting on it, the
-- lock held, for as long as TCP keeps the connection (hours). An instance whose wait for
-- the append lock ran out (lock_timeout) calls this function: it ends the backend of this
-- database that holds the lock ``lock_key`` and has waited on its client for longer than
-- ``silent``, and nothing else. SECURITY DEFINER, so the service role needs no right to
-- signal other sessions (the owner's rights do: a superuser, or pg_signal_backend).
-- PL/pgSQL, so that the checks are made before a backend is ended (in one SQL query the
-- planner may call pg_terminate_backend before the other conditions).
CREATE FUNCTION ledger_end_silent_append_holder(lock_key bigint, silent interval)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
AS $$
DECLARE
    holder integer;
    ended integer := 0;
BEGIN
    FOR holder IN
        SELECT a.pid
        FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((l.classid::bigint << 32) | l.objid::bigint) = lock_key
          AND a.pid <> pg_backend_pid()
          AND a.wait_event_type = 'Client' AND a.wait_event IN ('ClientRead', 'ClientWrite')
          AND a.state = 'active'  -- mid-exchange: idle in transaction is the server's own limit
          AND now() - a.state_change > silent
    LOOP
        IF pg_terminate_backend(holder) THEN
            ended := ended + 1;
        END IF;
    END LOOP;
    RETURN ended;
END
$$;

REVOKE ALL ON FUNCTION ledger_end_silent_append_holder(bigint, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger_end_silent_append_holder(bigint, interval) TO croupier_app;
