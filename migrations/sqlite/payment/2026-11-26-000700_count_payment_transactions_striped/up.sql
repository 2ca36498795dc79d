-- The number of transactions of each user (0: rows without one) and status, kept by triggers in
-- the same transaction as the write, so that a list reads its total from a few rows instead of
-- counting the caller's transactions on every request. SQLite has one writer at a time, so every
-- count is one row (stripe 0); PostgreSQL spreads a count over stripes (see its migration).
CREATE TABLE payment_transaction_counts (
    user_id BIGINT NOT NULL,
    status TEXT NOT NULL,
    stripe SMALLINT NOT NULL DEFAULT 0,
    transactions BIGINT NOT NULL,
    PRIMARY KEY (user_id, status, stripe)
);
INSERT INTO payment_transaction_counts (user_id, status, transactions)
SELECT COALESCE(user_id, 0), status, COUNT(*) FROM payment_transactions
GROUP BY COALESCE(user_id, 0), status;

CREATE TRIGGER payment_transactions_counted_insert AFTER INSERT ON payment_transactions
BEGIN
    INSERT OR IGNORE INTO payment_transaction_counts (user_id, status, transactions)
    VALUES (COALESCE(NEW.user_id, 0), NEW.status, 0);
    UPDATE payment_transaction_counts SET transactions = transactions + 1
    WHERE user_id = COALESCE(NEW.user_id, 0) AND status = NEW.status AND stripe = 0;
END;

CREATE TRIGGER payment_transactions_counted_delete AFTER DELETE ON payment_transactions
BEGIN
    UPDATE payment_transaction_counts SET transactions = transactions - 1
    WHERE user_id = COALESCE(OLD.user_id, 0) AND status = OLD.status AND stripe = 0;
END;

CREATE TRIGGER payment_transactions_counted_change AFTER UPDATE OF status, user_id
ON payment_transactions
WHEN OLD.status IS NOT NEW.status OR OLD.user_id IS NOT NEW.user_id
BEGIN
    UPDATE payment_transaction_counts SET transactions = transactions - 1
    WHERE user_id = COALESCE(OLD.user_id, 0) AND status = OLD.status AND stripe = 0;
    INSERT OR IGNORE INTO payment_transaction_counts (user_id, status, transactions)
    VALUES (COALESCE(NEW.user_id, 0), NEW.status, 0);
    UPDATE payment_transaction_counts SET transactions = transactions + 1
    WHERE user_id = COALESCE(NEW.user_id, 0) AND status = NEW.status AND stripe = 0;
END;
