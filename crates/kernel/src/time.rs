//! UTC time: values are kept to microseconds (both databases store the same value) and written as
//! RFC 3339 with a `Z` suffix and six fractional digits, e.g. `2026-11-21T15:27:40.254637Z`.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, SubsecRound, Utc};

/// The current UTC time, truncated to microseconds, as stored in the database.
pub fn now() -> NaiveDateTime {
    Utc::now().naive_utc().trunc_subsecs(6)
}

/// RFC 3339 with `Z` and microseconds.
pub fn format(t: &NaiveDateTime) -> String {
    let mut buf = [0; RFC3339_LEN];
    match write_rfc3339(t, &mut buf) {
        Some(text) => text.to_owned(),
        None => slow_format(t),
    }
}

/// chrono's RFC 3339 writer: for the years and leap seconds [`write_rfc3339`] leaves to it.
pub(crate) fn slow_format(t: &NaiveDateTime) -> String {
    DateTime::<Utc>::from_naive_utc_and_offset(*t, Utc).to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The length of `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) const RFC3339_LEN: usize = 27;

/// Writes `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` into `buf`, without allocating and without
/// chrono's general formatter (a page of posts writes a hundred of these). `None` for what only
/// chrono writes right: a year outside 0..=9999 or a leap second.
pub(crate) fn write_rfc3339<'b>(
    t: &NaiveDateTime,
    buf: &'b mut [u8; RFC3339_LEN],
) -> Option<&'b str> {
    use chrono::{Datelike, Timelike};
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = t.nanosecond();
    if nanos >= 1_000_000_000 {
        return None;
    }
    let fields: [(u32, usize, usize); 7] = [
        (year, 0, 4),
        (t.month(), 5, 2),
        (t.day(), 8, 2),
        (t.hour(), 11, 2),
        (t.minute(), 14, 2),
        (t.second(), 17, 2),
        (nanos / 1000, 20, 6),
    ];
    for (value, at, width) in fields {
        let mut rest = value;
        for slot in buf[at..at + width].iter_mut().rev() {
            *slot = b'0' + (rest % 10) as u8; // a digit: rest % 10 < 10
            rest /= 10;
        }
    }
    for (at, byte) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        buf[at] = byte;
    }
    buf[26] = b'Z';
    std::str::from_utf8(buf).ok()
}

/// The text diesel writes for a timestamp on SQLite (chrono's `%F %T%.f`: `YYYY-MM-DD HH:MM:SS`,
/// then the fraction in the fewest of 3, 6 or 9 digits that hold it, none for a whole second),
/// without chrono's general formatter, which reads its format string again for every value (the
/// message log writes two on every send). Times the fast writer leaves to chrono still go to it.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn sqlite_text(t: &NaiveDateTime) -> String {
    use chrono::Timelike;
    let mut buf = [0; RFC3339_LEN];
    let nanos = t.nanosecond();
    if nanos.is_multiple_of(1000)
        && let Some(text) = write_rfc3339(t, &mut buf)
    {
        let end = match nanos / 1000 {
            0 => 19,
            micros if micros.is_multiple_of(1000) => 23,
            _ => 26,
        };
        let mut out = String::with_capacity(end);
        out.push_str(&text[..10]);
        out.push(' ');
        out.push_str(&text[11..end]);
        return out;
    }
    t.format("%F %T%.f").to_string()
}

/// Reads the text diesel writes for a timestamp on SQLite, `YYYY-MM-DD HH:MM:SS` with an
/// optional fraction of up to nine digits, without chrono's general parser (which reads its
/// format string again for every value). `None` for anything else.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
fn parse_sqlite_text(text: &str) -> Option<NaiveDateTime> {
    let b = text.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let number = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let nanos = match &b[19..] {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            number(20, b.len())? * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::try_from(number(0, 4)?).ok()?,
        number(5, 7)?,
        number(8, 10)?,
    )?;
    date.and_hms_nano_opt(number(11, 13)?, number(14, 16)?, number(17, 19)?, nanos)
}

/// A `Timestamp` column read with `parse_sqlite_text` on SQLite (falling back to diesel's own
/// reader for any other text) and with diesel's reader on PostgreSQL. Hot rows read their times
/// through it: `#[diesel(deserialize_as = kernel::time::StoredTime)]`. Bound as a parameter, it
/// is written on SQLite by `sqlite_text` (the same text diesel writes, sooner), on PostgreSQL by
/// diesel: `#[diesel(serialize_as = kernel::time::StoredTime)]` on a field of an insert.
#[derive(Debug, Clone, Copy, diesel::deserialize::FromSqlRow, diesel::expression::AsExpression)]
#[diesel(sql_type = diesel::sql_types::Timestamp)]
pub struct StoredTime(pub NaiveDateTime);

impl From<NaiveDateTime> for StoredTime {
    fn from(t: NaiveDateTime) -> Self {
        StoredTime(t)
    }
}

/// [`StoredTime`] for a nullable column:
/// `#[diesel(deserialize_as = kernel::time::StoredTimeOpt)]`.
#[derive(Debug, Clone, Copy, diesel::deserialize::FromSqlRow)]
pub struct StoredTimeOpt(pub Option<NaiveDateTime>);

impl From<StoredTime> for NaiveDateTime {
    fn from(t: StoredTime) -> Self {
        t.0
    }
}

impl From<StoredTimeOpt> for Option<NaiveDateTime> {
    fn from(t: StoredTimeOpt) -> Self {
        t.0
    }
}

mod stored {
    use chrono::NaiveDateTime;
    use diesel::deserialize::{self, FromSql};
    #[cfg(feature = "postgres")]
    use diesel::pg::Pg;
    use diesel::serialize::{self, Output, ToSql};
    use diesel::sql_types::{Nullable, Timestamp};
    #[cfg(feature = "sqlite")]
    use diesel::sqlite::Sqlite;

    #[cfg(feature = "sqlite")]
    use super::parse_sqlite_text;
    use super::{StoredTime, StoredTimeOpt};

    #[cfg(feature = "sqlite")]
    impl FromSql<Timestamp, Sqlite> for StoredTime {
        fn from_sql(
            mut value: diesel::sqlite::SqliteValue<'_, '_, '_>,
        ) -> deserialize::Result<Self> {
            if let Some(t) = parse_sqlite_text(value.read_text()) {
                return Ok(StoredTime(t));
            }
            <NaiveDateTime as FromSql<Timestamp, Sqlite>>::from_sql(value).map(StoredTime)
        }
    }

    #[cfg(feature = "sqlite")]
    impl ToSql<Timestamp, Sqlite> for StoredTime {
        fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
            out.set_value(super::sqlite_text(&self.0));
            Ok(serialize::IsNull::No)
        }
    }

    #[cfg(feature = "postgres")]
    impl ToSql<Timestamp, Pg> for StoredTime {
        fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
            <NaiveDateTime as ToSql<Timestamp, Pg>>::to_sql(&self.0, out)
        }
    }

    #[cfg(feature = "postgres")]
    impl FromSql<Timestamp, Pg> for StoredTime {
        fn from_sql(value: diesel::pg::PgValue<'_>) -> deserialize::Result<Self> {
            <NaiveDateTime as FromSql<Timestamp, Pg>>::from_sql(value).map(StoredTime)
        }
    }

    impl<DB> FromSql<Nullable<Timestamp>, DB> for StoredTimeOpt
    where
        DB: diesel::backend::Backend,
        StoredTime: FromSql<Timestamp, DB>,
    {
        fn from_sql(value: DB::RawValue<'_>) -> deserialize::Result<Self> {
            StoredTime::from_sql(value).map(|t| StoredTimeOpt(Some(t.0)))
        }

        fn from_nullable_sql(value: Option<DB::RawValue<'_>>) -> deserialize::Result<Self> {
            match value {
                Some(value) => Self::from_sql(value),
                None => Ok(StoredTimeOpt(None)),
            }
        }
    }
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
        let mut buf = [0; super::RFC3339_LEN];
        match super::write_rfc3339(t, &mut buf) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_str(&super::slow_format(t)),
        }
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
            Some(t) => super::rfc3339::serialize(t, s),
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

    /// The fast writer against chrono's, over every field's edges and the years around them;
    /// what it leaves to chrono (years past 9999, before 0, leap seconds) still comes out right.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_fast_writer_writes_what_chrono_writes() {
        use chrono::NaiveDate;
        let mut times = Vec::new();
        for year in [0, 1, 9, 10, 99, 100, 999, 1000, 1970, 2026, 9999] {
            for (month, day) in [(1, 1), (2, 28), (12, 31)] {
                for (h, m, sec, micro) in [(0, 0, 0, 0), (9, 5, 7, 1), (23, 59, 59, 999_999)] {
                    let date = NaiveDate::from_ymd_opt(year, month, day).unwrap();
                    times.push(date.and_hms_micro_opt(h, m, sec, micro).unwrap());
                }
            }
        }
        times.push(
            NaiveDate::from_ymd_opt(2026, 6, 30)
                .unwrap()
                .and_hms_nano_opt(23, 59, 59, 1_500_000_000)
                .unwrap(),
        );
        times.push(
            NaiveDate::from_ymd_opt(10000, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap(),
        );
        times.push(
            NaiveDate::from_ymd_opt(-1, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap(),
        );
        for t in times {
            assert_eq!(format(&t), slow_format(&t), "{t:?}");
            let json = serde_json::to_string(&Timestamp(t)).unwrap();
            assert_eq!(json, format!("\"{}\"", slow_format(&t)));
        }
    }

    /// The fast reader reads what diesel writes on SQLite (and so what chrono's parser reads),
    /// and refuses anything else, which then goes to diesel's own reader.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_fast_reader_reads_what_diesel_writes() {
        use chrono::NaiveDate;
        let date = NaiveDate::from_ymd_opt(2026, 11, 21).unwrap();
        for nanos in [0, 1_000, 254_637_000, 999_999_999, 500_000_000, 7] {
            let t = date.and_hms_nano_opt(15, 27, 40, nanos).unwrap();
            let written = t.format("%F %T%.f").to_string();
            assert_eq!(parse_sqlite_text(&written), Some(t), "{written}");
        }
        for (text, expected) in [
            (
                "2026-11-21 15:27:40.5",
                date.and_hms_milli_opt(15, 27, 40, 500),
            ),
            ("2026-11-21 15:27:40", date.and_hms_opt(15, 27, 40)),
            (
                "2026-11-21 15:27:40.123456789",
                date.and_hms_nano_opt(15, 27, 40, 123_456_789),
            ),
        ] {
            assert_eq!(parse_sqlite_text(text), expected, "{text}");
        }
        for text in [
            "",
            "2026-11-21",
            "2026-11-21T15:27:40",
            "2026-11-21 15:27:40.",
            "2026-11-21 15:27:40Z",
            "2026-11-21 15:27:40.1234567890",
            "2026-02-30 00:00:00",
            "2026-11-21 24:00:00",
            "2026-1a-21 15:27:40",
            "+026-11-21 15:27:40",
            "2026-11-21 15:27:40+01:00",
            "2460000.5",
            "２０２６-11-21 15:27:40",
        ] {
            assert_eq!(parse_sqlite_text(text), None, "{text}");
        }
    }

    /// The fast SQLite writer writes what diesel writes (chrono's `%F %T%.f`), for every length
    /// of fraction and for what it leaves to chrono, and the fast reader reads it back.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_fast_sqlite_writer_writes_what_diesel_writes() {
        use chrono::NaiveDate;
        let mut times = Vec::new();
        for year in [0, 9, 999, 1970, 2026, 9999] {
            let date = NaiveDate::from_ymd_opt(year, 12, 31).unwrap();
            for nanos in [
                0,
                1_000_000,
                500_000_000,
                999_000_000,
                1_000,
                254_637_000,
                999_999_000,
                7,
                123_456_789,
                1_500_000_000,
            ] {
                times.push(date.and_hms_nano_opt(23, 59, 59, nanos).unwrap());
            }
        }
        for year in [10000, -1] {
            let date = NaiveDate::from_ymd_opt(year, 1, 1).unwrap();
            times.push(date.and_hms_micro_opt(0, 0, 0, 250).unwrap());
        }
        for t in times {
            let text = sqlite_text(&t);
            assert_eq!(text, t.format("%F %T%.f").to_string(), "{t:?}");
            if (0..=9999).contains(&chrono::Datelike::year(&t)) && t.nanosecond() < 1_000_000_000 {
                assert_eq!(parse_sqlite_text(&text), Some(t), "{text}");
            }
        }
    }

    #[test]
    fn format_uses_z_and_six_digits() {
        let t = DateTime::parse_from_rfc3339("2026-11-21T15:27:40.25Z")
            .map(|t| t.naive_utc())
            .unwrap_or_default();
        assert_eq!(format(&t), "2026-11-21T15:27:40.250000Z");
    }
}
