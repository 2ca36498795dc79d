//! Cross-module flows live in `flows.rs`.
