DROP TABLE comms_suppressions;
