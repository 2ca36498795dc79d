DROP INDEX payment_transactions_created_idx;
DROP INDEX payment_transactions_user_idx;
CREATE INDEX payment_transactions_created_idx ON payment_transactions (created_at DESC, id DESC);
CREATE INDEX payment_transactions_user_idx ON payment_transactions (user_id, created_at DESC, id DESC);
