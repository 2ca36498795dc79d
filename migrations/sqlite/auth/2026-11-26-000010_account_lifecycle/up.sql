-- Whether the address was proven by a verification (or password-reset) mail.
ALTER TABLE users ADD COLUMN email_verified BOOLEAN NOT NULL DEFAULT 0;
-- Carried by every access token (claim `sv`): a password reset or a sign-out everywhere raises it,
-- and tokens that carry an older value stop working.
ALTER TABLE users ADD COLUMN session_version INTEGER NOT NULL DEFAULT 0;

-- Refresh tokens, stored as the SHA-256 of the token (never the token). Each sign-in starts a
-- family; a refresh marks its token used and adds the next one to the family. A used token that
-- comes back revokes the whole family.
CREATE TABLE auth_refresh_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    family TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at TIMESTAMP,
    revoked_at TIMESTAMP
);
CREATE INDEX auth_refresh_tokens_family ON auth_refresh_tokens (family);
CREATE INDEX auth_refresh_tokens_user ON auth_refresh_tokens (user_id);

-- Single-use tokens sent by mail (purpose `verify_email` or `password_reset`), stored as the
-- SHA-256 of the token.
CREATE TABLE auth_mail_tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    purpose TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMP NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    used_at TIMESTAMP
);
CREATE INDEX auth_mail_tokens_user ON auth_mail_tokens (user_id, purpose);
