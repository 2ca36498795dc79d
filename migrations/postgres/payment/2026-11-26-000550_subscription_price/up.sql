-- The Stripe price of a subscription (its first item's), which PAYMENT_PLANS maps to a plan name.
-- Rows stored before this column are matched by their plan_name.
ALTER TABLE payment_subscriptions ADD COLUMN price_id TEXT;
