-- A transaction that writes many payment transactions may count them once, at its end, instead
-- of once a row. It sets `keel.payment_counts_later` to `on` (SET LOCAL), creates the table below
-- if its session lacks it, and before it commits adds up what the table holds in one statement
-- (the webhook's writer does so for each batch of events: see its store).
--
-- Why: every count update of a transaction leaves a version of its count row that cannot be
-- pruned before the transaction ends. A batch of 64 events left about 77 of them, two rows'
-- chains filled a page, updates moved to other pages, and a handful of live count rows ended up
-- spread over tens of pages, which every page of transactions then reads (docs/performance.md).
-- Counted once a transaction, a count row gets one new version a batch and stays where it is.
--
-- The changes wait in a temporary table of the session (`payment_count_changes`): it is written
-- without WAL, seen by no other session, and rolls back with the transaction. A transaction that
-- does not set the variable counts each row at once, as before.
CREATE OR REPLACE FUNCTION payment_transactions_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('keel.payment_counts_later', true) = 'on' THEN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            INSERT INTO pg_temp.payment_count_changes (user_id, status, change)
            VALUES (COALESCE(OLD.user_id, 0), OLD.status, -1);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO pg_temp.payment_count_changes (user_id, status, change)
            VALUES (COALESCE(NEW.user_id, 0), NEW.status, 1);
        END IF;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        INSERT INTO payment_transaction_counts (user_id, status, stripe, transactions)
        VALUES (COALESCE(OLD.user_id, 0), OLD.status, pg_backend_pid() % 64, -1)
        ON CONFLICT (user_id, status, stripe)
        DO UPDATE SET transactions = payment_transaction_counts.transactions - 1;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO payment_transaction_counts (user_id, status, stripe, transactions)
        VALUES (COALESCE(NEW.user_id, 0), NEW.status, pg_backend_pid() % 64, 1)
        ON CONFLICT (user_id, status, stripe)
        DO UPDATE SET transactions = payment_transaction_counts.transactions + 1;
    END IF;
    RETURN NULL;
END;
$$;
