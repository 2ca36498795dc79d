-- The provider and model that wrote each reply (AI_FALLBACK_PROVIDERS may hand a question to
-- another provider than AI_PROVIDER). NULL for the user's messages and for earlier replies.
ALTER TABLE ai_messages ADD COLUMN provider TEXT;
ALTER TABLE ai_messages ADD COLUMN model TEXT;
