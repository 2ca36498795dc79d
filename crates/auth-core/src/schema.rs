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
    }
}
