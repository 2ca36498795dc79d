-- Tokens spent per caller and UTC day, for the daily budgets (AI_DAILY_TOKENS_<PLAN>). user_id is
-- the caller's identifier as a string, as in ai_conversations; day is 'YYYY-MM-DD' (UTC). Each
-- reply adds to its row in one statement (an upsert), so concurrent replies lose nothing.
CREATE TABLE ai_usage (
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, day)
);
CREATE INDEX ai_usage_day_idx ON ai_usage (day);
