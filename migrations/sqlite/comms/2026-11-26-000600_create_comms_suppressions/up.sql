-- The suppression list: addresses and numbers the module no longer sends to, because the
-- provider reported a hard bounce or a spam complaint (email), an opt-out (Twilio error 21610),
-- or the recipient replied STOP (SMS). An address is lower-case, a number E.164, so one address
-- has one row whatever channel reported it.
CREATE TABLE comms_suppressions (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms')),
    address TEXT NOT NULL,
    reason TEXT NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'unsubscribed', 'stop')),
    -- the provider's words: the bounce message, the error, the keyword
    detail TEXT,
    -- the provider's id of the email or SMS the event was about
    provider_id TEXT,
    created_at TIMESTAMP NOT NULL
);

CREATE UNIQUE INDEX comms_suppressions_address_idx ON comms_suppressions (address);
-- The list, newest first.
CREATE INDEX comms_suppressions_created_idx ON comms_suppressions (created_at DESC, id DESC);
