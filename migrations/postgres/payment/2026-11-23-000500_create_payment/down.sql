DROP TABLE payment_events;
DROP TABLE payment_disputes;
DROP TABLE payment_subscriptions;
DROP TABLE payment_transactions;
DROP TABLE payment_customers;
