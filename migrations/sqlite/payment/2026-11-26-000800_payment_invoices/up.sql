-- Stripe invoices as their webhook events tell them (invoice.finalized, .paid, .payment_failed,
-- .voided, .marked_uncollectible), one row per invoice. A user sees the invoices of their Stripe
-- customers (joined through payment_customers when read, so an invoice stored before its
-- customer had a user is theirs once it has one). status_rank and event_created keep the newest
-- state whatever the order of delivery.
CREATE TABLE payment_invoices (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    provider_invoice_id TEXT NOT NULL UNIQUE,
    provider_customer_id TEXT,
    provider_subscription_id TEXT,
    number TEXT,
    status TEXT NOT NULL,
    -- draft 0, open 1, uncollectible 2, paid and void 3: a state never goes back down
    status_rank INTEGER NOT NULL,
    amount_due BIGINT NOT NULL,
    amount_paid BIGINT NOT NULL,
    amount_remaining BIGINT NOT NULL,
    currency TEXT NOT NULL,
    hosted_invoice_url TEXT,
    invoice_pdf TEXT,
    period_start TIMESTAMP,
    period_end TIMESTAMP,
    -- the invoice's own `created` at Stripe
    invoice_created TIMESTAMP NOT NULL,
    event_type TEXT NOT NULL,
    event_created BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX payment_invoices_customer_idx ON payment_invoices (provider_customer_id, invoice_created DESC, id DESC);
CREATE INDEX payment_invoices_created_idx ON payment_invoices (invoice_created DESC, id DESC);
