//! UTC time: values are kept to microseconds (both databases store the same value) and written as
//! RFC 3339 with a `Z` suffix and six fractional digits, e.g. `2026-11-21T15:27:40.254637Z`.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, SubsecRound, Utc};

/// The current UTC time, truncated to microseconds, as stored in the database.
pub fn now() -> NaiveDateTime {
    Utc::now().naive_utc().trunc_subsecs(6)
}

/// RFC 3339 with `Z` and microseconds.
pub fn format(t: &NaiveDateTime) -> String {
    DateTime::<Utc>::from_naive_utc_and_offset(*t, Utc).to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A UTC instant in an API body: written as RFC 3339 with `Z` and microseconds, read from any
/// RFC 3339 time (converted to UTC), documented as a `date-time` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub NaiveDateTime);

impl From<NaiveDateTime> for Timestamp {
    fn from(t: NaiveDateTime) -> Self {
        Timestamp(t)
    }
}

impl From<Timestamp> for NaiveDateTime {
    fn from(t: Timestamp) -> Self {
        t.0
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format(&self.0))
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        rfc3339::serialize(&self.0, s)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        rfc3339::deserialize(d).map(Timestamp)
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "UTC, RFC 3339 with a Z suffix and microseconds, e.g. 2026-11-21T15:27:40.254637Z",
            ))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

/// `#[serde(with = "kernel::time::rfc3339")]` for `NaiveDateTime` fields holding UTC.
pub mod rfc3339 {
    use chrono::{DateTime, NaiveDateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &NaiveDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDateTime, D::Error> {
        let raw = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&raw)
            .map(|t| t.with_timezone(&Utc).naive_utc())
            .map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "kernel::time::rfc3339_opt")]` for `Option<NaiveDateTime>` fields holding UTC.
pub mod rfc3339_opt {
    use chrono::NaiveDateTime;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<NaiveDateTime>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::format(t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDateTime>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::rfc3339")] NaiveDateTime);
        Ok(Option::<Wrap>::deserialize(d)?.map(|Wrap(t)| t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Timelike;

    #[test]
    fn now_has_microsecond_precision() {
        assert_eq!(now().nanosecond() % 1000, 0);
    }

    #[test]
    fn timestamps_round_trip_through_json() {
        let t = Timestamp(now());
        let json = serde_json::to_string(&t).unwrap_or_default();
        assert!(json.ends_with("Z\""), "{json}");
        let back: Option<Timestamp> = serde_json::from_str(&json).ok();
        assert_eq!(back, Some(t));
    }

    #[test]
    fn format_uses_z_and_six_digits() {
        let t = DateTime::parse_from_rfc3339("2026-11-21T15:27:40.25Z")
            .map(|t| t.naive_utc())
            .unwrap_or_default();
        assert_eq!(format(&t), "2026-11-21T15:27:40.250000Z");
    }
}
