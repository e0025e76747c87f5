-- A settlement fact of a 100,000-player shared hand is some 45 MB of JSON, stored out of
-- line (TOAST) and compressed. PostgreSQL's default, pglz, took about twice as long as lz4
-- to compress it inside the append transaction (under the append lock) and longer to read
-- it back for the relay's vouching. lz4 where the server was built with it; the stored
-- text, and so every hash, is the same either way. Rows written before keep their method.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE events ALTER COLUMN data SET COMPRESSION lz4;
    END IF;
END
$$;
