//! Periodic tasks: schedules (cron expressions or intervals), the `TASK_SCHEDULES` setting, and
//! the due times every scheduler computes alike. No I/O here.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use crate::domain::valid_name;

/// The shortest interval of `@every`.
const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest interval of `@every`: 366 days.
const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);

/// When a task runs by itself.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// As written (trimmed).
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// A cron expression, evaluated in UTC.
    Cron(Box<croner::Cron>),
    /// Every `period`, at multiples of it since the Unix epoch (so every server computes the
    /// same due times).
    Every(Duration),
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Schedule {
    /// A cron expression (five fields; six with seconds first; `@daily`, `@hourly`, `@weekly`,
    /// `@monthly`, `@yearly`) or `@every <n><s|m|h|d>`.
    pub fn parse(raw: &str) -> Result<Schedule, String> {
        let text = raw.trim();
        if text.is_empty() {
            return Err("the schedule is empty".to_owned());
        }
        if text.len() > 200 || text.chars().any(char::is_control) {
            return Err("a schedule is a cron expression or `@every <n>s|m|h|d`".to_owned());
        }
        let kind = match text.strip_prefix("@every") {
            Some(rest) => Kind::Every(parse_interval(rest.trim())?),
            None => Kind::Cron(Box::new(
                croner::parser::CronParser::new()
                    .parse(text)
                    .map_err(|e| format!("{text:?} is not a cron expression: {e}"))?,
            )),
        };
        let schedule = Schedule {
            text: text.to_owned(),
            kind,
        };
        // An expression that never matches (e.g. 30 February) is refused now, not silently idle.
        if schedule.next_after(Utc::now()).is_none() {
            return Err(format!("{text:?} never comes due"));
        }
        Ok(schedule)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first due time strictly after `after` (whole milliseconds).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every(period) => {
                let period = i64::try_from(period.as_millis()).ok()?.max(1);
                let now = after.timestamp_millis();
                let next = now.div_euclid(period).checked_add(1)?.checked_mul(period)?;
                Utc.timestamp_millis_opt(next).single()
            }
            Kind::Cron(cron) => {
                // Whole seconds: a cron time is a second's start.
                let from = Utc.timestamp_opt(after.timestamp(), 0).single()?;
                cron.find_next_occurrence(&from, false).ok()
            }
        }
    }

    /// How long a claim of one due run is kept: twice the gap to the next run, at least a minute
    /// (servers' clocks disagree by less) and at most a day.
    pub fn claim_ttl(&self, due: DateTime<Utc>) -> Duration {
        let gap = self
            .next_after(due)
            .and_then(|next| (next - due).to_std().ok())
            .unwrap_or(Duration::from_secs(3600));
        gap.saturating_mul(2)
            .clamp(Duration::from_secs(60), Duration::from_secs(24 * 3600))
    }
}

/// `90s`, `15m`, `2h`, `1d`.
fn parse_interval(raw: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "`@every {raw}`: write the interval as <n>s, <n>m, <n>h or <n>d (e.g. `@every 15m`)"
        )
    };
    let unit_at = raw.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = raw.split_at(unit_at);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        _ => None,
    }
    .ok_or_else(bad)?;
    let period = Duration::from_secs(seconds);
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&period) {
        return Err(format!(
            "`@every {raw}`: the interval must be from 1s to 366d"
        ));
    }
    Ok(period)
}

/// One entry of `TASK_SCHEDULES`: a task's schedule, or `None` to turn a module's schedule off.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleOverride {
    pub task: String,
    pub schedule: Option<Schedule>,
}

/// `TASK_SCHEDULES`: `name=schedule;name=schedule;...`, where a schedule is a cron expression,
/// `@every <n>s|m|h|d`, or `off`. Whether the names are registered tasks is checked once every
/// module has registered its tasks.
pub fn parse_overrides(raw: &str) -> Result<Vec<ScheduleOverride>, String> {
    let mut overrides: Vec<ScheduleOverride> = Vec::new();
    for entry in raw.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (task, schedule) = entry.split_once('=').ok_or_else(|| {
            format!("{entry:?} is not `task_name=schedule` (entries are separated by `;`)")
        })?;
        let task = task.trim();
        if !valid_name(task) {
            return Err(format!("{task:?} is not a task name"));
        }
        if overrides.iter().any(|o| o.task == task) {
            return Err(format!("{task} is given twice"));
        }
        let schedule = match schedule.trim() {
            s if s.eq_ignore_ascii_case("off") => None,
            s => Some(Schedule::parse(s).map_err(|e| format!("{task}: {e}"))?),
        };
        overrides.push(ScheduleOverride {
            task: task.to_owned(),
            schedule,
        });
    }
    Ok(overrides)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(raw: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(raw)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    #[test]
    fn cron_expressions_come_due_in_utc() {
        let daily = Schedule::parse("@daily").ok();
        let next = daily.and_then(|s| s.next_after(at("2026-11-21T15:27:40.254Z")));
        assert_eq!(next, Some(at("2026-11-22T00:00:00Z")));
        let every_five = Schedule::parse("*/5 * * * *").ok();
        let next = every_five.and_then(|s| s.next_after(at("2026-11-21T15:25:00Z")));
        assert_eq!(next, Some(at("2026-11-21T15:30:00Z")));
        let seconds = Schedule::parse("*/10 * * * * *").ok();
        let next = seconds.and_then(|s| s.next_after(at("2026-11-21T15:25:00.5Z")));
        assert_eq!(next, Some(at("2026-11-21T15:25:10Z")));
        // Both day fields restricted: either matches (Vixie cron), so the next Friday comes
        // before the next 13th. 2026-11-21 is a Saturday.
        let either = Schedule::parse("0 0 13 * FRI").ok();
        let next = either.and_then(|s| s.next_after(at("2026-11-21T12:00:00Z")));
        assert_eq!(next, Some(at("2026-11-27T00:00:00Z")));
    }

    #[test]
    fn intervals_are_aligned_to_the_epoch() {
        let s = Schedule::parse("@every 15m").ok();
        let next = s
            .as_ref()
            .and_then(|s| s.next_after(at("2026-11-21T15:27:40Z")));
        assert_eq!(next, Some(at("2026-11-21T15:30:00Z")));
        let due = at("2026-11-21T15:30:00Z");
        assert_eq!(s.map(|s| s.claim_ttl(due)), Some(Duration::from_secs(1800)));
        let short = Schedule::parse("@every 1s").ok();
        assert_eq!(
            short.map(|s| s.claim_ttl(due)),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn bad_schedules_say_what_to_write() {
        for bad in [
            "",
            "@every",
            "@every 0s",
            "@every 5x",
            "@every 400d",
            "61 * * * *",
            "* * *",
            "0 0 30 2 *",
            "@every 1s\0",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn the_setting_lists_schedules_and_offs() {
        let parsed = parse_overrides(" cleanup_expired_data = off ; my_task=*/5 * * * *;").ok();
        let parsed = parsed.unwrap_or_default();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].task, "cleanup_expired_data");
        assert!(parsed[0].schedule.is_none());
        assert_eq!(
            parsed[1].schedule.as_ref().map(Schedule::as_str),
            Some("*/5 * * * *")
        );
        assert!(parse_overrides("a=@every 1m;a=@daily").is_err());
        assert!(parse_overrides("no equals sign").is_err());
        assert!(parse_overrides("Bad Name=@daily").is_err());
        assert!(parse_overrides("a=nonsense").is_err());
        assert_eq!(parse_overrides("").ok(), Some(Vec::new()));
    }
}
