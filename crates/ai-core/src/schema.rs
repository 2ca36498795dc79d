diesel::table! {
    ai_conversations (id) {
        id -> Text,
        user_id -> Text,
        title -> Text,
        provider -> Text,
        model -> Text,
        message_count -> BigInt,
        last_response_time_ms -> Nullable<Double>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    ai_messages (id) {
        id -> Text,
        conversation_id -> Text,
        seq -> BigInt,
        role -> Text,
        content -> Text,
        created_at -> Timestamp,
        provider -> Nullable<Text>,
        model -> Nullable<Text>,
    }
}

diesel::joinable!(ai_messages -> ai_conversations (conversation_id));
diesel::allow_tables_to_appear_in_same_query!(ai_conversations, ai_messages);

diesel::table! {
    ai_usage (user_id, day) {
        user_id -> Text,
        day -> Text,
        tokens -> BigInt,
        updated_at -> Timestamp,
    }
}
