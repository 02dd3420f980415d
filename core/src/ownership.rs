//! Process-generation authority of the project lock, as pure decisions: the identity of a
//! process, the lock record that carries it, the parsers of what Linux reports, and the
//! classification of a recorded owner from what a probe saw.
//!
//! A lock owner is one exact process generation: `{pid, start token, boot id}`. A pid alone
//! is not authority (pids are reused), and neither is a start token without its boot (start
//! tokens count from boot). [`classify`] answers `Alive`, `Dead` or `Unknown`; `Unknown`
//! (permission denied, an unreadable or malformed identity, a platform without a reader) is
//! never treated as dead or alive: the adapter fails loudly with it.
//!
//! Nothing here reads a file: the `/proc` parsers take the text the adapter read.

use crate::time::Millis;
use std::fmt;

/// A boot identifier (Linux: `/proc/sys/kernel/random/boot_id`): 1 to 64 characters of
/// lowercase hex and `-`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BootId(String);

impl BootId {
    /// Parses a boot id (surrounding whitespace, such as the trailing newline of the `/proc`
    /// file, is ignored).
    pub fn parse(text: &str) -> Result<Self, IdentityError> {
        let t = text.trim();
        let ok = !t.is_empty()
            && t.len() <= 64
            && t.bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'-'));
        if ok {
            Ok(BootId(t.to_owned()))
        } else {
            Err(IdentityError(
                "boot id is not 1-64 characters of lowercase hex and '-'",
            ))
        }
    }

    /// The boot id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text reported by the OS that does not parse as an identity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed process identity: {0}")]
pub struct IdentityError(pub &'static str);

/// One exact process generation: pid, process start token and boot id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerIdentity {
    /// The process id.
    pub pid: u32,
    /// When the process started, in the platform's unit (Linux: `starttime` of
    /// `/proc/<pid>/stat`, clock ticks since boot). Distinguishes a reused pid.
    pub start_token: u64,
    /// The boot the process belongs to.
    pub boot_id: BootId,
}

impl fmt::Display for OwnerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} (start {}, boot {})",
            self.pid, self.start_token, self.boot_id
        )
    }
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The pid field.
    pub pid: u32,
    /// The state field (`R`, `S`, `Z`, ...).
    pub state: char,
    /// The raw `starttime` field (field 22).
    pub start_token: u64,
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may
/// itself contain spaces and parentheses, so the fields are read after the LAST `)`.
pub fn parse_proc_stat(text: &str) -> Result<ProcStat, IdentityError> {
    let open = text
        .find(" (")
        .ok_or(IdentityError("stat has no command name"))?;
    let close = text
        .rfind(')')
        .ok_or(IdentityError("stat has no command name"))?;
    if close < open {
        return Err(IdentityError("stat command name is not closed"));
    }
    let pid = text[..open]
        .parse::<u32>()
        .map_err(|_| IdentityError("stat pid is not a number"))?;
    // Fields 3.. follow the command name; starttime is field 22, i.e. the 20th of them.
    let mut rest = text[close + 1..].split_ascii_whitespace();
    let state = rest
        .next()
        .and_then(|s| {
            let mut c = s.chars();
            c.next().filter(|_| c.next().is_none())
        })
        .ok_or(IdentityError("stat state is not one character"))?;
    let start_token = rest
        .nth(18)
        .ok_or(IdentityError("stat has fewer than 22 fields"))?
        .parse::<u64>()
        .map_err(|_| IdentityError("stat starttime is not a number"))?;
    Ok(ProcStat {
        pid,
        state,
        start_token,
    })
}

/// What a probe saw of the process with a recorded pid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessSeen {
    /// No process has that pid.
    Absent,
    /// A process has that pid. A zombie has exited and only awaits its parent's `wait`.
    Present {
        /// Its start token.
        start_token: u64,
        /// Whether it has exited (Linux state `Z` or `X`).
        zombie: bool,
    },
    /// The OS refused to show the process (EPERM, EACCES).
    PermissionDenied,
    /// The process information could not be read or did not parse.
    Unreadable(String),
    /// This platform has no reader of process start tokens.
    Unsupported,
}

/// What a probe saw of the current boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootSeen {
    /// The current boot id.
    Known(BootId),
    /// The boot id could not be read or did not parse.
    Unreadable(String),
    /// This platform has no boot id reader.
    Unsupported,
}

/// Everything a probe reports about a recorded owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The current boot.
    pub boot: BootSeen,
    /// The process with the recorded pid.
    pub process: ProcessSeen,
}

/// Why a recorded owner is dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadReason {
    /// The machine rebooted since the owner recorded itself.
    OtherBoot,
    /// No process has the owner's pid.
    NoSuchProcess,
    /// The pid belongs to a different process generation (PID reuse).
    PidReused,
    /// The owner process has exited (a zombie not yet reaped).
    Exited,
}

/// Why a recorded owner's liveness cannot be decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnknownReason {
    /// The OS refused to show the process.
    PermissionDenied,
    /// The process information was unreadable or malformed.
    ProcessUnreadable(String),
    /// The boot id was unreadable or malformed, and the process itself looks alive.
    BootUnreadable(String),
    /// This platform has no reader.
    Unsupported,
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownReason::PermissionDenied => f.write_str("permission denied reading the process"),
            UnknownReason::ProcessUnreadable(why) => write!(f, "process unreadable: {why}"),
            UnknownReason::BootUnreadable(why) => write!(f, "boot id unreadable: {why}"),
            UnknownReason::Unsupported => {
                f.write_str("this platform has no process start token reader")
            }
        }
    }
}

/// The classification of a recorded owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The exact recorded process generation is running.
    Alive,
    /// The recorded process generation is gone: its lock may be recovered.
    Dead(DeadReason),
    /// Liveness cannot be decided: neither recover nor wait; fail loudly.
    Unknown(UnknownReason),
}

/// Classifies `recorded` from what a probe saw. The rows, in order:
///
/// | boot | process | answer |
/// |---|---|---|
/// | known, differs | any | `Dead(OtherBoot)` |
/// | any other | absent | `Dead(NoSuchProcess)` |
/// | any other | present, other start token | `Dead(PidReused)` |
/// | any other | present, same token, zombie | `Dead(Exited)` |
/// | known, same | present, same token, running | `Alive` |
/// | unreadable / unsupported | present, same token, running | `Unknown` |
/// | any other | permission denied / unreadable / unsupported | `Unknown` |
///
/// An absent pid or a different start token is dead whatever the boot: no process of that
/// generation exists now. A matching process is alive only when the boot is known to match.
pub fn classify(recorded: &OwnerIdentity, seen: &ProbeReport) -> Ownership {
    if let BootSeen::Known(boot) = &seen.boot {
        if *boot != recorded.boot_id {
            return Ownership::Dead(DeadReason::OtherBoot);
        }
    }
    match &seen.process {
        ProcessSeen::Absent => Ownership::Dead(DeadReason::NoSuchProcess),
        ProcessSeen::Present { start_token, .. } if *start_token != recorded.start_token => {
            Ownership::Dead(DeadReason::PidReused)
        }
        ProcessSeen::Present { zombie: true, .. } => Ownership::Dead(DeadReason::Exited),
        ProcessSeen::Present { .. } => match &seen.boot {
            BootSeen::Known(_) => Ownership::Alive,
            BootSeen::Unreadable(why) => {
                Ownership::Unknown(UnknownReason::BootUnreadable(why.clone()))
            }
            BootSeen::Unsupported => Ownership::Unknown(UnknownReason::Unsupported),
        },
        ProcessSeen::PermissionDenied => Ownership::Unknown(UnknownReason::PermissionDenied),
        ProcessSeen::Unreadable(why) => {
            Ownership::Unknown(UnknownReason::ProcessUnreadable(why.clone()))
        }
        ProcessSeen::Unsupported => Ownership::Unknown(UnknownReason::Unsupported),
    }
}

/// The per-acquisition nonce: 256 random bits supplied by the adapter. It tells one
/// acquisition of the lock from every other, including by the same process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockNonce([u8; 32]);

impl LockNonce {
    /// Wraps 32 random bytes produced by the caller.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        LockNonce(bytes)
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        crate::hex::encode(&self.0)
    }
}

/// The content of a lock file (and of a recovery claim): who holds it, which acquisition,
/// since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    /// The owner process generation.
    pub owner: OwnerIdentity,
    /// This acquisition's nonce.
    pub nonce: LockNonce,
    /// When it was acquired (wall clock; diagnostic only).
    pub acquired_at: Millis,
}

/// First line of a version-1 lock record.
pub const LOCK_RECORD_MAGIC: &str = "solewriter-project-lock v1";
/// Largest lock record accepted; a larger file is malformed.
pub const LOCK_RECORD_MAX_BYTES: usize = 512;

/// A lock file that is not a complete version-1 lock record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed lock record: {0}")]
pub struct RecordError(pub &'static str);

impl LockRecord {
    /// The exact bytes of the record: six `key value` lines.
    pub fn encode(&self) -> String {
        format!(
            "{LOCK_RECORD_MAGIC}\npid {}\nstart {}\nboot {}\nnonce {}\nacquired_ms {}\n",
            self.owner.pid,
            self.owner.start_token,
            self.owner.boot_id,
            self.nonce.to_hex(),
            self.acquired_at.0
        )
    }

    /// Parses exactly what [`Self::encode`] writes: the magic line, then `pid`, `start`,
    /// `boot`, `nonce`, `acquired_ms` in that order, each line ending in `\n`, nothing else,
    /// at most [`LOCK_RECORD_MAX_BYTES`]. An empty or truncated file is malformed.
    pub fn parse(bytes: &[u8]) -> Result<Self, RecordError> {
        if bytes.len() > LOCK_RECORD_MAX_BYTES {
            return Err(RecordError("larger than the size bound"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| RecordError("not UTF-8"))?;
        let body = text
            .strip_suffix('\n')
            .ok_or(RecordError("empty or not terminated by a newline"))?;
        let mut lines = body.split('\n');
        if lines.next() != Some(LOCK_RECORD_MAGIC) {
            return Err(RecordError("unknown format or version"));
        }
        let mut field = |key: &'static str| {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix(' '))
                .ok_or(RecordError("missing or misplaced field"))
        };
        let number = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| RecordError("field is not a number"))
        };
        let pid =
            u32::try_from(number(field("pid")?)?).map_err(|_| RecordError("pid out of range"))?;
        let start_token = number(field("start")?)?;
        let boot_id = BootId::parse(field("boot")?).map_err(|e| RecordError(e.0))?;
        let nonce = crate::hex::decode32(field("nonce")?)
            .ok_or(RecordError("nonce is not 64 lowercase hex"))?;
        let acquired_at = Millis(number(field("acquired_ms")?)?);
        if lines.next().is_some() {
            return Err(RecordError("trailing content"));
        }
        let record = LockRecord {
            owner: OwnerIdentity {
                pid,
                start_token,
                boot_id,
            },
            nonce: LockNonce(nonce),
            acquired_at,
        };
        // `+7`, `007` or a padded boot id parse, but are not what `encode` writes: refuse.
        if record.encode().as_bytes() != bytes {
            return Err(RecordError("not in canonical form"));
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(s: &str) -> BootId {
        BootId::parse(s).unwrap()
    }

    fn owner() -> OwnerIdentity {
        OwnerIdentity {
            pid: 4242,
            start_token: 777,
            boot_id: boot("0f1e2d3c-aaaa-bbbb-cccc-1234567890ab"),
        }
    }

    fn present(start_token: u64, zombie: bool) -> ProcessSeen {
        ProcessSeen::Present {
            start_token,
            zombie,
        }
    }

    #[test]
    fn classification_table() {
        let same = BootSeen::Known(owner().boot_id);
        let other = BootSeen::Known(boot("99999999-0000-0000-0000-000000000000"));
        let unreadable = BootSeen::Unreadable("eio".into());
        use DeadReason::*;
        let rows: Vec<(BootSeen, ProcessSeen, Ownership)> = vec![
            (same.clone(), present(777, false), Ownership::Alive),
            (
                same.clone(),
                ProcessSeen::Absent,
                Ownership::Dead(NoSuchProcess),
            ),
            (
                same.clone(),
                present(778, false),
                Ownership::Dead(PidReused),
            ),
            (same.clone(), present(777, true), Ownership::Dead(Exited)),
            (
                other.clone(),
                present(777, false),
                Ownership::Dead(OtherBoot),
            ),
            (
                other.clone(),
                ProcessSeen::PermissionDenied,
                Ownership::Dead(OtherBoot),
            ),
            (
                unreadable.clone(),
                ProcessSeen::Absent,
                Ownership::Dead(NoSuchProcess),
            ),
            (
                unreadable.clone(),
                present(1, false),
                Ownership::Dead(PidReused),
            ),
            (
                unreadable.clone(),
                present(777, false),
                Ownership::Unknown(UnknownReason::BootUnreadable("eio".into())),
            ),
            (
                BootSeen::Unsupported,
                present(777, false),
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
            (
                same.clone(),
                ProcessSeen::PermissionDenied,
                Ownership::Unknown(UnknownReason::PermissionDenied),
            ),
            (
                same.clone(),
                ProcessSeen::Unreadable("bad".into()),
                Ownership::Unknown(UnknownReason::ProcessUnreadable("bad".into())),
            ),
            (
                same,
                ProcessSeen::Unsupported,
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
            (
                BootSeen::Unsupported,
                ProcessSeen::Unsupported,
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
        ];
        for (boot, process, expected) in rows {
            let report = ProbeReport { boot, process };
            assert_eq!(classify(&owner(), &report), expected, "{report:?}");
        }
    }

    #[test]
    fn proc_stat_fields_are_read_after_the_last_parenthesis() {
        let tail = "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456 19 20";
        let plain = format!("31 (cat) {tail}\n");
        assert_eq!(
            parse_proc_stat(&plain),
            Ok(ProcStat {
                pid: 31,
                state: 'S',
                start_token: 123456
            })
        );
        // A command name with spaces, parentheses and digits must not shift the fields.
        let tricky = format!("31 (a) 9 9 (b c) ) {tail}");
        assert_eq!(parse_proc_stat(&tricky).unwrap().start_token, 123456);
        let zombie = format!("31 (x) Z{}", &tail[1..]);
        assert_eq!(parse_proc_stat(&zombie).unwrap().state, 'Z');
        for bad in [
            "",
            "31 (cat",
            "x (cat) S 1",
            "31 (cat) S 1 2 3",
            "31 (cat) SS 1",
        ] {
            assert!(parse_proc_stat(bad).is_err(), "{bad:?}");
        }
        let not_number = format!("31 (cat) {}", tail.replace("123456", "12x"));
        assert!(parse_proc_stat(&not_number).is_err());
    }

    #[test]
    fn boot_ids_are_restricted() {
        assert_eq!(boot("abc-1\n").as_str(), "abc-1");
        for bad in ["", "\n", "ABC", "a b", &"a".repeat(65)] {
            assert!(BootId::parse(bad).is_err(), "{bad:?}");
        }
    }

    fn record() -> LockRecord {
        LockRecord {
            owner: owner(),
            nonce: LockNonce::from_bytes([7; 32]),
            acquired_at: Millis(1_700_000_000_000),
        }
    }

    #[test]
    fn records_round_trip_and_only_complete_canonical_records_parse() {
        let text = record().encode();
        assert_eq!(LockRecord::parse(text.as_bytes()), Ok(record()));
        // Every strict prefix is a torn write: refused, never read as some owner.
        for cut in 0..text.len() {
            assert!(LockRecord::parse(&text.as_bytes()[..cut]).is_err(), "{cut}");
        }
        let variants = [
            text.replace("v1", "v2"),
            text.replace("pid 4242", "pid 04242"),
            text.replace("pid 4242", "pid +4242"),
            text.replace("start 777", "start -1"),
            text.replace("pid 4242", "pid 99999999999"),
            text.replace("nonce 07", "nonce 0G"),
            text.replace("\npid", "\nstart 1\npid"),
            format!("{text}extra\n"),
            text.replace('\n', "\r\n"),
        ];
        for v in variants {
            assert!(LockRecord::parse(v.as_bytes()).is_err(), "{v:?}");
        }
        let huge = vec![b'a'; LOCK_RECORD_MAX_BYTES + 1];
        assert_eq!(
            LockRecord::parse(&huge),
            Err(RecordError("larger than the size bound"))
        );
    }
}
