-- The AI module's conversations when AI_CONVERSATION_STORE=database (shared by every instance).
-- user_id is the caller's identifier as a string ('api-user', or a user id from a token).
CREATE TABLE ai_conversations (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    message_count BIGINT NOT NULL,
    last_response_time_ms DOUBLE PRECISION,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX ai_conversations_user_idx ON ai_conversations (user_id, updated_at DESC);
CREATE INDEX ai_conversations_updated_idx ON ai_conversations (updated_at);

CREATE TABLE ai_messages (
    id TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES ai_conversations (id) ON DELETE CASCADE,
    -- position in the conversation, from 0
    seq BIGINT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    UNIQUE (conversation_id, seq)
);
