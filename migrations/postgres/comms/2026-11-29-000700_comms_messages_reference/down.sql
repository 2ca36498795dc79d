-- Emails logged with a reference would break the unique index of provider ids only if a provider
-- had answered one id twice; the reference goes with its index.
DROP INDEX comms_messages_reference_idx;
DROP INDEX comms_messages_provider_id_idx;
CREATE UNIQUE INDEX comms_messages_provider_id_idx ON comms_messages (provider, provider_id);
ALTER TABLE comms_messages DROP COLUMN reference;
