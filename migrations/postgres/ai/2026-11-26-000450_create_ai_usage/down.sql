DROP TABLE ai_usage;
