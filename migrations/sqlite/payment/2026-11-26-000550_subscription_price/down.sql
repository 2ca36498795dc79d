ALTER TABLE payment_subscriptions DROP COLUMN price_id;
