//! Table definitions, portable across PostgreSQL and SQLite.

diesel::table! {
    users (id) {
        id -> BigInt,
        email -> Text,
        email_key -> Text,
        full_name -> Nullable<Text>,
        hashed_password -> Text,
        is_active -> Bool,
        role -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        email_verified -> Bool,
        session_version -> Integer,
    }
}

diesel::table! {
    auth_refresh_tokens (id) {
        id -> BigInt,
        user_id -> BigInt,
        family -> Text,
        token_hash -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
        used_at -> Nullable<Timestamp>,
        revoked_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    auth_mail_tokens (id) {
        id -> BigInt,
        user_id -> BigInt,
        purpose -> Text,
        token_hash -> Text,
        created_at -> Timestamp,
        expires_at -> Timestamp,
        used_at -> Nullable<Timestamp>,
    }
}

diesel::joinable!(auth_refresh_tokens -> users (user_id));
diesel::joinable!(auth_mail_tokens -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(users, auth_refresh_tokens, auth_mail_tokens);
