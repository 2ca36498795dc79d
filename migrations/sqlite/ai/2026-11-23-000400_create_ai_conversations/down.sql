DROP TABLE ai_messages;
DROP TABLE ai_conversations;
