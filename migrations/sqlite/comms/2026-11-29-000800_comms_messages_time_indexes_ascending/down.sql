DROP INDEX comms_messages_created_idx;
DROP INDEX comms_messages_user_idx;
CREATE INDEX comms_messages_created_idx ON comms_messages (created_at DESC, id DESC);
CREATE INDEX comms_messages_user_idx ON comms_messages (user_id, created_at DESC, id DESC);
