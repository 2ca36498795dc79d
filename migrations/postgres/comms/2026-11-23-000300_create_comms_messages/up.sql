-- The communications module's message log: one row per send that reached a provider, moved
-- forward by the providers' delivery webhooks. user_id is a plain integer without a foreign key:
-- the auth module may be absent.
CREATE TABLE comms_messages (
    id BIGSERIAL PRIMARY KEY,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms', 'voice')),
    provider TEXT NOT NULL,
    -- the recipients as a JSON array of strings
    recipients TEXT NOT NULL,
    subject TEXT,
    -- the first 200 characters of the text, the SMS body, or the TwiML URL
    preview TEXT,
    provider_id TEXT,
    status TEXT NOT NULL,
    error TEXT,
    user_id BIGINT,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- Webhooks find their message by the provider's id.
CREATE UNIQUE INDEX comms_messages_provider_id_idx ON comms_messages (provider, provider_id);
-- The log, newest first, whole or one user's.
CREATE INDEX comms_messages_created_idx ON comms_messages (created_at DESC, id DESC);
CREATE INDEX comms_messages_user_idx ON comms_messages (user_id, created_at DESC, id DESC);
