//! Configuration of the CLI: a TOML file (`--config FILE`) and flags, flags winning.
//!
//! ```toml
//! store = "store.sqlite"        # relative paths are relative to this file's directory
//! runtime_root = "runtime"
//! lease_ttl_ms = 1500           # required: there is no default
//! busy_timeout_ms = 5000        # required: there is no default
//! profile = "solewriter.hook-projection.v2"   # optional: the profile `init` makes the store of
//!
//! [[channels]]
//! name = "computed-route"
//! owner = "router"
//! envelope_schema = "computed-route.v1"
//! max_envelope_bytes = 65536
//! watermark = "integer"         # optional: integer (default), instant, instant-sequence, text
//! envelope_json_schema = '''{"type": "object", "required": ["items"]}'''   # optional
//! ```
//!
//! Every key may also be spelled in camelCase, as the library's JSON configuration spells it
//! (`runtimeRoot`, `leaseTtlMs`, `busyTimeoutMs`, `envelopeSchema`, `maxEnvelopeBytes`); one key
//! given in both spellings is refused. Without `--config`, the file named by the environment
//! variable [`CONFIG_ENV`] is read, if set.
//!
//! Each command asks only for what it needs (`read` needs only the runtime root), and a
//! missing value is an error naming its key and its flag. `init` checks the whole file,
//! channel registry included, before it creates anything.

use crate::error::{Class, CliError, CliResult};
use serde::Deserialize;
use solewriter::projection::ChannelSpec;
use solewriter::projection::EnvelopeSchema;
use solewriter::projection::Profile;
use solewriter::projection::WatermarkKind;
use solewriter::projection::{BusyTimeout, ConfigError, LeaseTtl};
use solewriter::{
    ChannelName, ChannelRegistry, Clock, ProducerId, RuntimeRoot, StoreOptions, SystemClock,
    TimingConfig,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The configuration flags, accepted before or after any subcommand.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigArgs {
    /// TOML configuration file (default: the file named by SOLEWRITER_CONFIG, if set).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Path of the SQLite store (overrides `store`).
    #[arg(long, global = true, value_name = "PATH")]
    pub store: Option<PathBuf>,
    /// Runtime root holding `hook-projections/` (overrides `runtime_root`).
    #[arg(long, global = true, value_name = "DIR")]
    pub runtime_root: Option<PathBuf>,
    /// Lease time-to-live in milliseconds (overrides `lease_ttl_ms`).
    #[arg(long, global = true, value_name = "MS")]
    pub lease_ttl_ms: Option<u64>,
    /// SQLite busy timeout in milliseconds (overrides `busy_timeout_ms`).
    #[arg(long, global = true, value_name = "MS")]
    pub busy_timeout_ms: Option<u64>,
}

/// One `[[channels]]` entry of the file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ChannelEntry {
    name: String,
    owner: String,
    #[serde(alias = "envelopeSchema")]
    envelope_schema: String,
    #[serde(alias = "maxEnvelopeBytes")]
    max_envelope_bytes: usize,
    /// The kind of watermark the channel's producer emits (`integer` when absent).
    #[serde(default)]
    watermark: WatermarkKind,
    /// The JSON Schema of the channel's envelopes, as JSON text (none when absent).
    #[serde(alias = "envelopeJsonSchema")]
    envelope_json_schema: Option<String>,
}

/// The file, as written.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    store: Option<PathBuf>,
    #[serde(alias = "runtimeRoot")]
    runtime_root: Option<PathBuf>,
    #[serde(alias = "leaseTtlMs")]
    lease_ttl_ms: Option<u64>,
    #[serde(alias = "busyTimeoutMs")]
    busy_timeout_ms: Option<u64>,
    profile: Option<String>,
    #[serde(default)]
    channels: Vec<ChannelEntry>,
}

/// The merged configuration: file values overridden by flags, and the broker clock.
pub struct Settings {
    store: Option<PathBuf>,
    runtime_root: Option<PathBuf>,
    lease_ttl_ms: Option<u64>,
    busy_timeout_ms: Option<u64>,
    profile: Option<String>,
    channels: Vec<ChannelEntry>,
    /// The broker clock of the stores this configuration opens: the system clock, unless the
    /// test binary replaced it ([`crate::Seams::clock`]).
    clock: Arc<dyn Clock>,
}

const UNTOUCHED: &str = "nothing was read or written";

fn missing(key: &str, flag: &str) -> CliError {
    CliError::config(format!(
        "configuration is missing required `{key}` (config key `{key}` or flag {flag}; there is no default); {UNTOUCHED}"
    ))
}

/// The file key and flag of a timing key as the core spells it.
fn timing_key(core_key: &'static str) -> (&'static str, &'static str) {
    if core_key == LeaseTtl::KEY {
        ("lease_ttl_ms", "--lease-ttl-ms")
    } else if core_key == BusyTimeout::KEY {
        ("busy_timeout_ms", "--busy-timeout-ms")
    } else {
        (core_key, "(no flag)")
    }
}

fn timing_error(error: ConfigError) -> CliError {
    match error {
        ConfigError::Missing { key } => {
            let (key, flag) = timing_key(key);
            missing(key, flag)
        }
        ConfigError::Zero { key } => CliError::config(format!(
            "configuration `{}` must be greater than zero; {UNTOUCHED}",
            timing_key(key).0
        )),
        ConfigError::OutOfRange { key, value } => CliError::config(format!(
            "configuration `{}` = {value} is out of range; {UNTOUCHED}",
            timing_key(key).0
        )),
        other => CliError::config(format!("{other}; {UNTOUCHED}")),
    }
}

/// The environment variable naming the config file when `--config` is not given.
pub const CONFIG_ENV: &str = "SOLEWRITER_CONFIG";

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Reads the config file at `path`, named by `named_by` (`--config` or [`CONFIG_ENV`]).
fn read_file(path: &Path, named_by: &str) -> CliResult<FileConfig> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::config(format!(
            "reading config file {} (named by {named_by}) failed: {e}; {UNTOUCHED}",
            path.display()
        ))
    })?;
    let mut file: FileConfig = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| line_of(&text, s.start)).unwrap_or(0);
        CliError::config(format!(
            "config file {} is malformed at line {line}: {}; {UNTOUCHED}",
            path.display(),
            e.message().trim()
        ))
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    for slot in [&mut file.store, &mut file.runtime_root] {
        if let Some(p) = slot.take() {
            *slot = Some(base.join(p));
        }
    }
    Ok(file)
}

impl Settings {
    /// Reads the file named by `--config` (if any) and applies the flags over it.
    pub fn load(args: &ConfigArgs) -> CliResult<Settings> {
        let from_env = std::env::var_os(CONFIG_ENV).filter(|path| !path.is_empty());
        let file = match (&args.config, from_env) {
            (Some(path), _) => read_file(path, "--config")?,
            (None, Some(path)) => read_file(Path::new(&path), CONFIG_ENV)?,
            (None, None) => FileConfig::default(),
        };
        Ok(Settings {
            store: args.store.clone().or(file.store),
            runtime_root: args.runtime_root.clone().or(file.runtime_root),
            lease_ttl_ms: args.lease_ttl_ms.or(file.lease_ttl_ms),
            busy_timeout_ms: args.busy_timeout_ms.or(file.busy_timeout_ms),
            profile: file.profile,
            channels: file.channels,
            clock: Arc::new(SystemClock),
        })
    }

    /// The same settings on another broker clock (the test binary's seam; see
    /// [`crate::Seams`]).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Settings {
        Settings { clock, ..self }
    }

    /// The broker clock: the system clock unless [`Self::with_clock`] replaced it.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The profile `init` makes the store of (`profile`; the generic one when absent). Every
    /// other command reads the store's own profile from the store.
    pub fn profile(&self) -> CliResult<Profile> {
        self.profile
            .as_deref()
            .map_or(Ok(Profile::Generic), |name| {
                Profile::parse(name)
                    .map_err(|e| CliError::config(format!("`profile`: {e}; {UNTOUCHED}")))
            })
    }

    /// The store path; its directory must exist (nothing creates it).
    pub fn store_path(&self) -> CliResult<&Path> {
        let path = self
            .store
            .as_deref()
            .ok_or_else(|| missing("store", "--store"))?;
        match path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            Some(dir) if !dir.is_dir() => Err(CliError::new(
                Class::Store,
                format!(
                    "the directory {} of store {} does not exist or is not a directory (create it first); {UNTOUCHED}",
                    dir.display(),
                    path.display()
                ),
            )),
            _ => Ok(path),
        }
    }

    /// The runtime root.
    pub fn runtime_root(&self) -> CliResult<RuntimeRoot> {
        self.runtime_root
            .clone()
            .map(RuntimeRoot::new)
            .ok_or_else(|| missing("runtime_root", "--runtime-root"))
    }

    /// The timing configuration; both values are required.
    pub fn timing(&self) -> CliResult<TimingConfig> {
        TimingConfig::from_values(self.lease_ttl_ms, self.busy_timeout_ms).map_err(timing_error)
    }

    /// The channel registry (`[[channels]]`; may be empty).
    pub fn registry(&self) -> CliResult<ChannelRegistry> {
        let refused = |what: String| CliError::config(format!("{what}; {UNTOUCHED}"));
        let specs = self
            .channels
            .iter()
            .map(|entry| {
                let name = ChannelName::parse(&entry.name)
                    .map_err(|e| refused(format!("channel name refused: {e}")))?;
                let owner = ProducerId::parse(&entry.owner)
                    .map_err(|e| refused(format!("owner of channel `{name}` refused: {e}")))?;
                let envelope_json_schema = entry
                    .envelope_json_schema
                    .as_deref()
                    .map(|text| {
                        serde_json::from_str(text)
                            .map_err(|e| e.to_string())
                            .and_then(EnvelopeSchema::compile)
                    })
                    .transpose()
                    .map_err(|e| {
                        refused(format!(
                            "envelope_json_schema of channel `{name}` refused: {e}"
                        ))
                    })?;
                Ok(ChannelSpec {
                    name,
                    owner,
                    envelope_schema: entry.envelope_schema.clone(),
                    max_envelope_bytes: entry.max_envelope_bytes,
                    watermark: entry.watermark,
                    envelope_json_schema,
                })
            })
            .collect::<CliResult<Vec<_>>>()?;
        ChannelRegistry::new(specs).map_err(|e| refused(format!("channel registry refused: {e}")))
    }

    /// Everything needed to open the store, on the broker clock ([`Self::clock`]).
    pub fn store_options(&self) -> CliResult<StoreOptions> {
        Ok(StoreOptions {
            db_path: self.store_path()?.to_owned(),
            runtime_root: self.runtime_root()?,
            timing: self.timing()?,
            registry: self.registry()?,
            clock: self.clock(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
