DROP TRIGGER payment_transactions_api_json_stale ON payment_transactions;
DROP FUNCTION payment_transactions_api_json_stale();
ALTER TABLE payment_transactions DROP COLUMN api_json;
