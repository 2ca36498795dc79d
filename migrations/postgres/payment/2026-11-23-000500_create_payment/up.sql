-- The payment module: Stripe customers, transactions (charges and refunds), subscriptions,
-- disputes (and early fraud warnings), and the ids of processed webhook events. user_id is a
-- plain integer without a foreign key: the auth module may be absent.
CREATE TABLE payment_customers (
    id BIGSERIAL PRIMARY KEY,
    user_id BIGINT,
    provider_customer_id TEXT NOT NULL UNIQUE,
    email TEXT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_customers_user_idx ON payment_customers (user_id);

CREATE TABLE payment_transactions (
    id BIGSERIAL PRIMARY KEY,
    user_id BIGINT,
    provider_customer_id TEXT,
    kind TEXT NOT NULL CHECK (kind IN ('charge', 'refund')),
    status TEXT NOT NULL,
    amount BIGINT NOT NULL,
    amount_refunded BIGINT NOT NULL DEFAULT 0,
    currency TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    -- the payment intent (charges), the refund id (refunds), or the session / invoice id
    provider_transaction_id TEXT NOT NULL UNIQUE,
    payment_intent_id TEXT,
    charge_id TEXT,
    parent_id BIGINT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_transactions_user_idx ON payment_transactions (user_id, created_at DESC, id DESC);
CREATE INDEX payment_transactions_created_idx ON payment_transactions (created_at DESC, id DESC);
CREATE INDEX payment_transactions_intent_idx ON payment_transactions (payment_intent_id);
CREATE INDEX payment_transactions_charge_idx ON payment_transactions (charge_id);

CREATE TABLE payment_subscriptions (
    id BIGSERIAL PRIMARY KEY,
    user_id BIGINT,
    provider_customer_id TEXT,
    provider_subscription_id TEXT NOT NULL UNIQUE,
    plan_name TEXT NOT NULL,
    status TEXT NOT NULL,
    current_period_start TIMESTAMP,
    current_period_end TIMESTAMP,
    cancel_at_period_end BOOLEAN NOT NULL,
    -- the `created` time of the newest event applied: older events change nothing
    event_created BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_subscriptions_user_idx ON payment_subscriptions (user_id);

CREATE TABLE payment_disputes (
    id BIGSERIAL PRIMARY KEY,
    transaction_id BIGINT,
    provider_dispute_id TEXT NOT NULL UNIQUE,
    charge_id TEXT,
    payment_intent_id TEXT,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    amount BIGINT NOT NULL,
    currency TEXT NOT NULL,
    evidence_due_by TIMESTAMP,
    event_type TEXT NOT NULL,
    event_created BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_disputes_charge_idx ON payment_disputes (charge_id);

CREATE TABLE payment_events (
    id TEXT PRIMARY KEY NOT NULL,
    event_type TEXT NOT NULL,
    processed_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_events_processed_idx ON payment_events (processed_at);
