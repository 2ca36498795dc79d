diesel::table! {
    payment_customers (id) {
        id -> BigInt,
        user_id -> Nullable<BigInt>,
        provider_customer_id -> Text,
        email -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    payment_transactions (id) {
        id -> BigInt,
        user_id -> Nullable<BigInt>,
        provider_customer_id -> Nullable<Text>,
        kind -> Text,
        status -> Text,
        amount -> BigInt,
        amount_refunded -> BigInt,
        currency -> Text,
        description -> Text,
        provider_transaction_id -> Text,
        payment_intent_id -> Nullable<Text>,
        charge_id -> Nullable<Text>,
        parent_id -> Nullable<BigInt>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        api_json -> Nullable<Text>,
    }
}

diesel::table! {
    payment_subscriptions (id) {
        id -> BigInt,
        user_id -> Nullable<BigInt>,
        provider_customer_id -> Nullable<Text>,
        provider_subscription_id -> Text,
        plan_name -> Text,
        status -> Text,
        current_period_start -> Nullable<Timestamp>,
        current_period_end -> Nullable<Timestamp>,
        cancel_at_period_end -> Bool,
        event_created -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        price_id -> Nullable<Text>,
    }
}

diesel::table! {
    payment_disputes (id) {
        id -> BigInt,
        transaction_id -> Nullable<BigInt>,
        provider_dispute_id -> Text,
        charge_id -> Nullable<Text>,
        payment_intent_id -> Nullable<Text>,
        status -> Text,
        reason -> Text,
        amount -> BigInt,
        currency -> Text,
        evidence_due_by -> Nullable<Timestamp>,
        event_type -> Text,
        event_created -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    payment_events (id) {
        id -> Text,
        event_type -> Text,
        processed_at -> Timestamp,
    }
}

diesel::table! {
    payment_invoices (id) {
        id -> BigInt,
        provider_invoice_id -> Text,
        provider_customer_id -> Nullable<Text>,
        provider_subscription_id -> Nullable<Text>,
        number -> Nullable<Text>,
        status -> Text,
        status_rank -> Integer,
        amount_due -> BigInt,
        amount_paid -> BigInt,
        amount_remaining -> BigInt,
        currency -> Text,
        hosted_invoice_url -> Nullable<Text>,
        invoice_pdf -> Nullable<Text>,
        period_start -> Nullable<Timestamp>,
        period_end -> Nullable<Timestamp>,
        invoice_created -> Timestamp,
        event_type -> Text,
        event_created -> BigInt,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    /// Kept by triggers: transactions per user (0: none) and status, the sum of its stripes.
    payment_transaction_counts (user_id, status, stripe) {
        user_id -> BigInt,
        status -> Text,
        stripe -> SmallInt,
        transactions -> BigInt,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    payment_customers,
    payment_disputes,
    payment_events,
    payment_invoices,
    payment_subscriptions,
    payment_transaction_counts,
    payment_transactions,
);
