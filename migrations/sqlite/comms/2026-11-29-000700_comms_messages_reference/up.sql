-- Each email names its row by a reference keel chooses before the send (a UUIDv7, so new
-- references sort last and their index grows at one end), carried to Resend as the tag
-- keel_message, which Resend sends back in every event of that email: events find their row by
-- it. The provider's id is random (Resend's are UUIDv4), and indexing it cost each send a page of
-- its own; it stays indexed, and unique, only for the rows without a reference (SMS, calls, and
-- emails logged before references), which webhooks still find by it.
ALTER TABLE comms_messages ADD COLUMN reference TEXT;
DROP INDEX comms_messages_provider_id_idx;
CREATE UNIQUE INDEX comms_messages_provider_id_idx ON comms_messages (provider, provider_id)
    WHERE reference IS NULL;
CREATE UNIQUE INDEX comms_messages_reference_idx ON comms_messages (reference)
    WHERE reference IS NOT NULL;
