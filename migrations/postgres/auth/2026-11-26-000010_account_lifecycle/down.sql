DROP TABLE auth_mail_tokens;
DROP TABLE auth_refresh_tokens;
ALTER TABLE users DROP COLUMN session_version;
ALTER TABLE users DROP COLUMN email_verified;
