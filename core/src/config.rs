//! Timing configuration. Every timing value is required from the host's configuration
//! boundary: there is no `Default`, no literal fallback, and zero is rejected, so a
//! configuration gap fails loudly instead of becoming a plausible-but-wrong lease window.

use serde::Deserialize;
use std::num::NonZeroU64;
use std::time::Duration;

/// Why a configuration value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required key is absent. Nothing is assumed in its place.
    #[error("configuration is missing required `{key}` (there is no default)")]
    Missing {
        /// The configuration key, as spelled in the configuration source.
        key: &'static str,
    },
    /// A timing value is zero.
    #[error("configuration `{key}` must be greater than zero")]
    Zero {
        /// The configuration key.
        key: &'static str,
    },
    /// A timing value is larger than the store can represent.
    #[error("configuration `{key}` = {value} is out of range")]
    OutOfRange {
        /// The configuration key.
        key: &'static str,
        /// The refused value.
        value: u64,
    },
    /// A timing value given as a `Duration` is not a whole number of milliseconds.
    #[error("configuration `{key}` must be a whole number of milliseconds")]
    NotWholeMillis {
        /// The configuration key.
        key: &'static str,
    },
    /// The configuration source is not valid (not JSON, wrong types, unknown keys).
    #[error("configuration is malformed: {0}")]
    Malformed(String),
}

/// The whole milliseconds of `duration`; anything finer, or beyond `u64`, is refused.
fn whole_millis(key: &'static str, duration: Duration) -> Result<u64, ConfigError> {
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(ConfigError::NotWholeMillis { key });
    }
    u64::try_from(duration.as_millis()).map_err(|_| ConfigError::OutOfRange {
        key,
        value: u64::MAX,
    })
}

fn positive(key: &'static str, value: Option<u64>) -> Result<NonZeroU64, ConfigError> {
    let value = value.ok_or(ConfigError::Missing { key })?;
    if value > crate::STORAGE_INTEGER_MAX {
        return Err(ConfigError::OutOfRange { key, value });
    }
    NonZeroU64::new(value).ok_or(ConfigError::Zero { key })
}

/// How long a granted lease lasts. A lease is never held past `acquired_at + ttl`: there is
/// no renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTtl(NonZeroU64);

impl LeaseTtl {
    /// Configuration key of the lease TTL.
    pub const KEY: &'static str = "leaseTtlMs";

    /// Builds a TTL from an explicit number of milliseconds; zero or absent is an error.
    pub fn from_millis(ms: Option<u64>) -> Result<Self, ConfigError> {
        positive(Self::KEY, ms).map(LeaseTtl)
    }

    /// The TTL in milliseconds.
    pub fn as_millis(self) -> u64 {
        self.0.get()
    }

    /// The TTL as a `Duration`.
    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0.get())
    }
}

/// How long a store operation waits for SQLite's write lock before failing with `Busy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyTimeout(NonZeroU64);

impl BusyTimeout {
    /// Configuration key of the busy timeout.
    pub const KEY: &'static str = "busyTimeoutMs";

    /// Builds a busy timeout from an explicit number of milliseconds; zero or absent is an error.
    pub fn from_millis(ms: Option<u64>) -> Result<Self, ConfigError> {
        positive(Self::KEY, ms).map(BusyTimeout)
    }

    /// The timeout in milliseconds.
    pub fn as_millis(self) -> u64 {
        self.0.get()
    }

    /// The timeout as a `Duration`.
    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0.get())
    }
}

/// The timing half of the writer's configuration, as the Memory Core hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingConfig {
    /// Lease time-to-live.
    pub lease_ttl: LeaseTtl,
    /// SQLite busy timeout.
    pub busy_timeout: BusyTimeout,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTiming {
    lease_ttl_ms: Option<u64>,
    busy_timeout_ms: Option<u64>,
}

impl TimingConfig {
    /// Builds the configuration from durations (whole milliseconds, greater than zero).
    pub fn new(lease_ttl: Duration, busy_timeout: Duration) -> Result<Self, ConfigError> {
        Self::from_values(
            Some(whole_millis(LeaseTtl::KEY, lease_ttl)?),
            Some(whole_millis(BusyTimeout::KEY, busy_timeout)?),
        )
    }

    /// Parses `{"leaseTtlMs": N, "busyTimeoutMs": M}`. Both keys are required.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let raw: RawTiming =
            serde_json::from_str(text).map_err(|e| ConfigError::Malformed(e.to_string()))?;
        Self::from_values(raw.lease_ttl_ms, raw.busy_timeout_ms)
    }

    /// Builds the configuration from values looked up by the host (TOML, flags, environment).
    pub fn from_values(
        lease_ttl_ms: Option<u64>,
        busy_timeout_ms: Option<u64>,
    ) -> Result<Self, ConfigError> {
        Ok(TimingConfig {
            lease_ttl: LeaseTtl::from_millis(lease_ttl_ms)?,
            busy_timeout: BusyTimeout::from_millis(busy_timeout_ms)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_taken_in_whole_milliseconds_only() {
        let ms = Duration::from_millis;
        let timing = TimingConfig::new(ms(1500), ms(250)).unwrap();
        assert_eq!(timing.lease_ttl.as_duration(), ms(1500));
        assert_eq!(timing.busy_timeout.as_millis(), 250);
        assert_eq!(
            TimingConfig::new(ms(1500), Duration::from_micros(250_500)).unwrap_err(),
            ConfigError::NotWholeMillis {
                key: "busyTimeoutMs"
            }
        );
        assert_eq!(
            TimingConfig::new(Duration::ZERO, ms(1)).unwrap_err(),
            ConfigError::Zero { key: "leaseTtlMs" }
        );
        assert!(matches!(
            TimingConfig::new(Duration::MAX - Duration::from_nanos(999_999_999), ms(1)),
            Err(ConfigError::OutOfRange { .. })
        ));
    }

    #[test]
    fn missing_lease_ttl_fails_loudly() {
        let err = TimingConfig::from_json(r#"{"busyTimeoutMs": 50}"#).unwrap_err();
        assert_eq!(err, ConfigError::Missing { key: "leaseTtlMs" });
        assert!(err.to_string().contains("leaseTtlMs"));
    }

    #[test]
    fn missing_busy_timeout_fails_loudly() {
        let err = TimingConfig::from_json(r#"{"leaseTtlMs": 50}"#).unwrap_err();
        assert_eq!(
            err,
            ConfigError::Missing {
                key: "busyTimeoutMs"
            }
        );
    }

    #[test]
    fn zero_is_refused() {
        assert_eq!(
            TimingConfig::from_json(r#"{"leaseTtlMs": 0, "busyTimeoutMs": 5}"#).unwrap_err(),
            ConfigError::Zero { key: "leaseTtlMs" }
        );
        assert_eq!(
            BusyTimeout::from_millis(Some(0)).unwrap_err(),
            ConfigError::Zero {
                key: "busyTimeoutMs"
            }
        );
    }

    #[test]
    fn out_of_range_and_malformed_are_refused() {
        assert!(matches!(
            LeaseTtl::from_millis(Some(u64::MAX)),
            Err(ConfigError::OutOfRange { .. })
        ));
        assert!(matches!(
            TimingConfig::from_json(r#"{"leaseTtlMs": "5", "busyTimeoutMs": 5}"#),
            Err(ConfigError::Malformed(_))
        ));
        assert!(matches!(
            TimingConfig::from_json(r#"{"leaseTtlMs": 5, "busyTimeoutMs": 5, "ttl": 1}"#),
            Err(ConfigError::Malformed(_))
        ));
    }

    #[test]
    fn explicit_values_are_kept() {
        let cfg = TimingConfig::from_json(r#"{"leaseTtlMs": 1500, "busyTimeoutMs": 40}"#).unwrap();
        assert_eq!(cfg.lease_ttl.as_millis(), 1500);
        assert_eq!(cfg.busy_timeout.as_millis(), 40);
    }
}
