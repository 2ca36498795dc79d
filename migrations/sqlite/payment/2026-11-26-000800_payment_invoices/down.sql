DROP TABLE payment_invoices;
