-- The log's time indexes ascend. Descending, every new row (the latest) went in at the index's
-- first position, where a B-tree has no fast path: each full page split in two, and left half
-- of itself empty behind. Ascending, new rows go at the end, where both backends append. A list
-- newest first reads the same index backwards.
DROP INDEX comms_messages_created_idx;
DROP INDEX comms_messages_user_idx;
CREATE INDEX comms_messages_created_idx ON comms_messages (created_at, id);
CREATE INDEX comms_messages_user_idx ON comms_messages (user_id, created_at, id);
