DROP TABLE comms_messages;
