-- SQLite alone: there the time indexes of payment_transactions now carry each row's JSON, so
-- that a page is read from its index (see the SQLite migration of the same name). PostgreSQL
-- keeps its indexes: an index holding the JSON would serve a page alone only from heap pages
-- the visibility map marks all-visible, and every change of a row's JSON would write the index
-- as well, where today such an update can stay on its heap page (HOT). Its page already runs at
-- PostgreSQL's own rate for the statement (docs/performance.md).
SELECT 1;
