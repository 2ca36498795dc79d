-- The number of transactions of each user (0: rows without one) and status, kept by triggers in
-- the same transaction as the write, so that a list reads its total from a few rows instead of
-- counting the caller's transactions on every request.
CREATE TABLE payment_transaction_counts (
    user_id BIGINT NOT NULL,
    status TEXT NOT NULL,
    transactions BIGINT NOT NULL,
    PRIMARY KEY (user_id, status)
);
INSERT INTO payment_transaction_counts (user_id, status, transactions)
SELECT COALESCE(user_id, 0), status, COUNT(*) FROM payment_transactions
GROUP BY COALESCE(user_id, 0), status;

CREATE FUNCTION payment_transactions_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE payment_transaction_counts SET transactions = transactions - 1
        WHERE user_id = COALESCE(OLD.user_id, 0) AND status = OLD.status;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO payment_transaction_counts (user_id, status, transactions)
        VALUES (COALESCE(NEW.user_id, 0), NEW.status, 1)
        ON CONFLICT (user_id, status)
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
