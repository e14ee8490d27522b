-- The one-round-trip commit sends its rows in the flight that takes the writers' lock, before
-- it can read the halt: this raises (SQLSTATE AEH01) inside that transaction when a halt is
-- committed, so the rows after it are refused and COMMIT ends the transaction as a rollback.
CREATE FUNCTION aether_refuse_if_halted() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT halted FROM halt WHERE id = 1) THEN
        RAISE EXCEPTION 'Aether is halted' USING ERRCODE = 'AEH01';
    END IF;
END
$$;
