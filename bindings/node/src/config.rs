//! A store's configuration as the addon holds it: [`Store`], checked once when the JS
//! `ProjectionStore` is made (`NativeStore`'s constructor), and [`Config`], one call's view of
//! it — the store with that call's clock reading and, for a publication, its consumer binding.

use super::failure::{invalid, Code, Failure};
use super::from_js;
use napi_derive::napi;
use serde_json::Value;
use solewriter_core::config::LeaseTtl;
use solewriter_core::projection::channel::{ChannelRegistry, ChannelSpec};
use solewriter_core::projection::composition::Composition;
use solewriter_core::projection::profile::{ConsumerBinding, Profile};
use solewriter_core::time::Millis;
use solewriter_files::clock::{Clock, SystemClock};
use solewriter_files::runtime::RuntimeRoot;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

/// The longest lease TTL a Node store accepts (2^52 ms, about 142,000 years): with any clock
/// reading below 2^52 ms, a grant's `acquired_at + ttl` stays below 2^53, a number JS holds
/// exactly (a larger TTL would be accepted and then make every grant unreadable from JS).
const MAX_LEASE_TTL_MS: u64 = 1 << 52;

/// A store's configuration. Every field is optional here only so that a missing one is refused
/// by [`Store::parse`] with `INVALID_CONFIG` naming it (there is no default for any of them),
/// never by the binding layer with a code of its own.
#[napi(object)]
pub struct Options {
    /// The channel registry: a JSON array of `{name, owner, envelopeSchema, maxEnvelopeBytes}`.
    pub channels_json: Option<String>,
    /// The lease TTL in ms (required, at least 1).
    pub lease_ttl_ms: Option<f64>,
    /// How long the target lock is waited for, in ms (required, at least 1).
    pub busy_timeout_ms: Option<f64>,
    /// The host's runtime root: documents under `<runtimeRoot>/hook-projections/` (it must
    /// exist when a publication runs). Exactly one of it and `hookProjectionRoot` is required.
    pub runtime_root: Option<String>,
    /// The directory, of any name, that holds `<targetId>/current.json` (its parent must exist
    /// when a publication runs; it is made on first use).
    pub hook_projection_root: Option<String>,
    /// The store's profile: `solewriter.hook-projection.v2` (when absent) or
    /// `live-lane-awareness-projection.v1` (the Memory Core's).
    pub profile: Option<String>,
}

/// What one call adds to its store's configuration.
#[napi(object)]
pub struct CallOptions {
    /// A fixed broker clock for this call's decision outside a machine (a submission, an
    /// inspection: tests); the system clock when absent.
    pub clock_ms: Option<f64>,
    /// The store has a clock of the host's (`clock`): every clock step of a machine asks the
    /// executor for a reading (`readClock`), as the machine reads the system clock otherwise.
    pub host_clock: Option<bool>,
    /// A publication's consumer binding, as JSON (Memory Core profile: required to publish).
    pub consumer_binding_json: Option<String>,
    /// The store has a probe of the host's (`probe`), shown each reached point of a
    /// publication: an asynchronous batch then runs its lock-free parts one after the other,
    /// so that each of their reached points is a turn of the event loop's (without one, at
    /// once, on a thread per target).
    pub probe: Option<bool>,
}

/// A store's configuration, checked.
pub(crate) struct Store {
    pub(crate) registry: ChannelRegistry,
    pub(crate) profile: Profile,
    pub(crate) ttl: LeaseTtl,
    pub(crate) busy_timeout: Duration,
    pub(crate) root: RuntimeRoot,
}

/// One call's configuration: its store's, its clock, its consumer binding.
pub(crate) struct Config {
    store: Arc<Store>,
    pub(crate) binding: Option<ConsumerBinding>,
    /// The broker clock's fixed reading (tests); the system clock when `None`.
    clock: Option<Millis>,
    /// Whether a machine's clock steps ask the host's clock ([`BrokerClock::Host`]).
    host_clock: bool,
    /// Whether the host has a probe ([`CallOptions::probe`]).
    pub(crate) probe: bool,
}

/// Where a machine's clock steps are answered.
#[derive(Clone, Copy)]
pub(crate) enum BrokerClock {
    /// The system clock, read at each step.
    System,
    /// The host's clock, asked through the executor at each step (`readClock`).
    Host,
}

impl Deref for Config {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

/// A configuration that is wrong: `INVALID_CONFIG`, naming the field.
fn bad_config(field: &str, what: impl std::fmt::Display) -> Failure {
    Failure::new(
        Code::InvalidConfig,
        format!("configuration `{field}`: {what}; nothing was done"),
    )
}

/// A required millisecond count of the configuration: present, a safe integer, at least 1.
fn config_ms(value: Option<f64>, field: &str) -> Result<u64, Failure> {
    let value = value.ok_or_else(|| bad_config(field, "missing (there is no default)"))?;
    let ms = from_js(value, field).map_err(|e| bad_config(field, e.message))?;
    if ms == 0 {
        return Err(bad_config(field, "must be at least 1 ms"));
    }
    Ok(ms)
}

impl Store {
    /// The store of `options`, or `INVALID_CONFIG` naming the first field that is wrong.
    pub(crate) fn parse(options: &Options) -> Result<Self, Failure> {
        let channels = options
            .channels_json
            .as_deref()
            .ok_or_else(|| bad_config("channels", "missing (an array, maybe empty)"))?;
        let specs = channel_specs(channels).map_err(|e| bad_config("channels", e))?;
        let registry = ChannelRegistry::new(specs).map_err(|e| bad_config("channels", e))?;
        let ttl_ms = config_ms(options.lease_ttl_ms, "leaseTtlMs")?;
        if ttl_ms > MAX_LEASE_TTL_MS {
            return Err(bad_config(
                "leaseTtlMs",
                format!("must be at most 2^52 ms ({MAX_LEASE_TTL_MS}), so that a grant's expiry stays a number JS holds exactly"),
            ));
        }
        let ttl = LeaseTtl::from_millis(Some(ttl_ms)).map_err(|e| bad_config("leaseTtlMs", e))?;
        let busy_timeout =
            Duration::from_millis(config_ms(options.busy_timeout_ms, "busyTimeoutMs")?);
        let root = match (
            options.runtime_root.as_deref(),
            options.hook_projection_root.as_deref(),
        ) {
            (Some(root), None) if !root.is_empty() => RuntimeRoot::new(root),
            (None, Some(dir)) => RuntimeRoot::projections_at(dir).ok_or_else(|| {
                bad_config(
                    "hookProjectionRoot",
                    format!("{dir:?} names no directory below another"),
                )
            })?,
            (Some(_), Some(_)) => {
                return Err(bad_config(
                    "runtimeRoot",
                    "give it or `hookProjectionRoot`, not both",
                ))
            }
            _ => return Err(bad_config("runtimeRoot", "missing")),
        };
        let profile = match options.profile.as_deref() {
            None => Profile::Generic,
            Some(name) => Profile::parse(name).map_err(|e| bad_config("profile", e))?,
        };
        registry
            .check_profile(profile)
            .map_err(|e| bad_config("channels", e))?;
        Ok(Store {
            registry,
            profile,
            ttl,
            busy_timeout,
            root,
        })
    }
}

/// The channel specs of a registry given as a JSON array, each read on its own so that a
/// refusal names its channel (a field missing or wrong, an envelope JSON Schema that does not
/// compile).
pub(crate) fn channel_specs(json: &str) -> Result<Vec<ChannelSpec>, String> {
    let specs: Vec<Value> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    specs
        .into_iter()
        .map(|spec| {
            let channel = match spec.get("name") {
                Some(Value::String(name)) => format!("channel `{name}`: "),
                _ => String::new(),
            };
            serde_json::from_value(spec).map_err(|e| format!("{channel}{e}"))
        })
        .collect()
}

/// The configuration of one call on `store`: `INVALID_INPUT` for a clock reading or a consumer
/// binding that is not one.
pub(crate) fn call(store: &Arc<Store>, call: Option<&CallOptions>) -> Result<Config, Failure> {
    let clock = match call.and_then(|c| c.clock_ms) {
        Some(ms) => Some(Millis(from_js(ms, "clock")?)),
        None => None,
    };
    let binding = call
        .and_then(|c| c.consumer_binding_json.as_deref())
        .map(ConsumerBinding::from_json)
        .transpose()
        .map_err(|e| invalid(format!("consumerBinding: {e}; nothing was written")))?;
    Ok(Config {
        store: Arc::clone(store),
        binding,
        clock,
        host_clock: call.and_then(|c| c.host_clock) == Some(true),
        probe: call.and_then(|c| c.probe) == Some(true),
    })
}

/// [`call`] for a publication: its consumer binding must fit the profile (`INVALID_INPUT`
/// otherwise, before anything is done), so [`Config::composition`] is the profile's.
pub(crate) fn publication(
    store: &Arc<Store>,
    options: Option<&CallOptions>,
) -> Result<Config, Failure> {
    let config = call(store, options)?;
    Composition::for_store(config.profile, &config.registry, config.binding.as_ref())
        .map_err(|e| invalid(format!("{e}; nothing was written")))?;
    Ok(config)
}

impl Config {
    /// The broker clock of a decision outside a machine: the call's fixed reading, or the
    /// system clock.
    pub(crate) fn now(&self) -> Millis {
        self.clock.unwrap_or_else(|| SystemClock.now())
    }

    /// Where this call's machine reads its clock.
    pub(crate) fn broker_clock(&self) -> BrokerClock {
        if self.host_clock {
            BrokerClock::Host
        } else {
            BrokerClock::System
        }
    }

    /// What a publication composes with (checked by [`publication`]).
    pub(crate) fn composition(&self) -> Composition<'_> {
        match &self.binding {
            Some(binding) => Composition::memory_core(&self.registry, binding),
            None => (&self.registry).into(),
        }
    }
}
