//! Stripe over its REST API (form-encoded requests, JSON answers) on the outbound HTTP client,
//! and the verification of its webhook signatures.

mod client;
pub mod signature;

pub use client::{
    CheckoutParams, CheckoutSession, PortalSession, Refund, RefundParams, Stripe, StripeError,
};
