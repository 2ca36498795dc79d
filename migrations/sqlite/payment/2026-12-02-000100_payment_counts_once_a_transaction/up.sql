-- PostgreSQL alone: there a transaction may count its payment transactions once, at its end
-- (see the PostgreSQL migration of the same name). SQLite updates a count row in place, one
-- writer at a time, so its triggers count each row as before.
SELECT 1;
