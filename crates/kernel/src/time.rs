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
    fn format_uses_z_and_six_digits() {
        let t = DateTime::parse_from_rfc3339("2026-11-21T15:27:40.25Z")
            .map(|t| t.naive_utc())
            .unwrap_or_default();
        assert_eq!(format(&t), "2026-11-21T15:27:40.250000Z");
    }
}
