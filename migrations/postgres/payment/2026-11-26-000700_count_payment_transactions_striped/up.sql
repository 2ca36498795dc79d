-- The number of transactions of each user (0: rows without one) and status, kept by triggers in
-- the same transaction as the write, so that a list reads its total from a few rows instead of
-- counting the caller's transactions on every request.
--
-- A count is spread over up to 64 stripes, each connection adding to its own
-- (pg_backend_pid() % 64): a write locks its stripe's row until it commits, so with one row per
-- count every concurrent webhook of a user would wait for the one before it. A stripe may go
-- below zero (a row counted in one stripe, recounted in another); the sum is the count.
CREATE TABLE payment_transaction_counts (
    user_id BIGINT NOT NULL,
    status TEXT NOT NULL,
    stripe SMALLINT NOT NULL,
    transactions BIGINT NOT NULL,
    PRIMARY KEY (user_id, status, stripe)
);
INSERT INTO payment_transaction_counts (user_id, status, stripe, transactions)
SELECT COALESCE(user_id, 0), status, 0, COUNT(*) FROM payment_transactions
GROUP BY COALESCE(user_id, 0), status;

CREATE FUNCTION payment_transactions_count() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE TRIGGER payment_transactions_counted AFTER INSERT OR DELETE ON payment_transactions
FOR EACH ROW EXECUTE FUNCTION payment_transactions_count();

CREATE TRIGGER payment_transactions_counted_change AFTER UPDATE OF status, user_id
ON payment_transactions FOR EACH ROW
WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.user_id IS DISTINCT FROM NEW.user_id)
EXECUTE FUNCTION payment_transactions_count();
