diesel::table! {
    comms_messages (id) {
        id -> BigInt,
        channel -> Text,
        provider -> Text,
        recipients -> Text,
        subject -> Nullable<Text>,
        preview -> Nullable<Text>,
        provider_id -> Nullable<Text>,
        status -> Text,
        error -> Nullable<Text>,
        user_id -> Nullable<BigInt>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        reference -> Nullable<Text>,
    }
}

diesel::table! {
    comms_suppressions (id) {
        id -> BigInt,
        channel -> Text,
        address -> Text,
        reason -> Text,
        detail -> Nullable<Text>,
        provider_id -> Nullable<Text>,
        created_at -> Timestamp,
    }
}
