ALTER TABLE ai_messages DROP COLUMN model;
ALTER TABLE ai_messages DROP COLUMN provider;
