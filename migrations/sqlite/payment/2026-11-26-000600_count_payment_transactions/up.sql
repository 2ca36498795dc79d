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

CREATE TRIGGER payment_transactions_counted_insert AFTER INSERT ON payment_transactions
BEGIN
    INSERT OR IGNORE INTO payment_transaction_counts (user_id, status, transactions)
    VALUES (COALESCE(NEW.user_id, 0), NEW.status, 0);
    UPDATE payment_transaction_counts SET transactions = transactions + 1
    WHERE user_id = COALESCE(NEW.user_id, 0) AND status = NEW.status;
END;

CREATE TRIGGER payment_transactions_counted_delete AFTER DELETE ON payment_transactions
BEGIN
    UPDATE payment_transaction_counts SET transactions = transactions - 1
    WHERE user_id = COALESCE(OLD.user_id, 0) AND status = OLD.status;
END;

CREATE TRIGGER payment_transactions_counted_change AFTER UPDATE OF status, user_id
ON payment_transactions
WHEN OLD.status IS NOT NEW.status OR OLD.user_id IS NOT NEW.user_id
BEGIN
    UPDATE payment_transaction_counts SET transactions = transactions - 1
    WHERE user_id = COALESCE(OLD.user_id, 0) AND status = OLD.status;
    INSERT OR IGNORE INTO payment_transaction_counts (user_id, status, transactions)
    VALUES (COALESCE(NEW.user_id, 0), NEW.status, 0);
    UPDATE payment_transaction_counts SET transactions = transactions + 1
    WHERE user_id = COALESCE(NEW.user_id, 0) AND status = NEW.status;
END;
