-- Each transaction's JSON as a list shows it, written by the module with the row: a page then
-- copies each row's stored text instead of reading eight columns into strings and escaping them
-- again on every request. The text is the object of every field of a transaction response but
-- `id`. NULL means "not written": the reads then write the row from its columns, and the module
-- writes what is missing when it starts.
ALTER TABLE payment_transactions ADD COLUMN api_json TEXT;

-- A write that changes what the JSON shows without writing the JSON too (a hand edit, or a
-- program that does not know the column) leaves it NULL rather than stale. A write of the shown
-- columns that changes none of them (the module saving a row whose user or refunded amount
-- changed) keeps it.
CREATE FUNCTION payment_transactions_api_json_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.api_json := NULL;
    RETURN NEW;
END;
$$;

CREATE TRIGGER payment_transactions_api_json_stale
BEFORE UPDATE OF provider_transaction_id, kind, status, amount, currency, description, created_at
ON payment_transactions FOR EACH ROW
WHEN (NEW.api_json IS NOT DISTINCT FROM OLD.api_json
    AND (NEW.provider_transaction_id, NEW.kind, NEW.status, NEW.amount, NEW.currency,
         NEW.description, NEW.created_at)
        IS DISTINCT FROM
        (OLD.provider_transaction_id, OLD.kind, OLD.status, OLD.amount, OLD.currency,
         OLD.description, OLD.created_at))
EXECUTE FUNCTION payment_transactions_api_json_stale();
