CREATE OR REPLACE FUNCTION payment_transactions_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
