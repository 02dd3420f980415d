//! Process-generation authority of the project lock, as pure decisions: the identity of a
//! process, the lock record that carries it, the parsers of what Linux reports, and the
//! classification of a recorded owner from what a probe saw.
//!
//! A lock owner is one exact process generation: `{pid, start token, boot id, PID namespace}`.
//! A pid alone is not authority (pids are reused), a start token means nothing without its
//! boot (start tokens count from boot), and a pid means nothing outside its PID namespace (a
//! holder in a container is pid 1 there). [`classify`] answers `Alive`, `Dead` or `Unknown`;
//! `Unknown` (another PID namespace, another boot, a `/proc` that hides the pid, permission
//! denied, an unreadable or malformed identity, a platform without a reader) is never treated
//! as dead or alive: the adapter fails loudly with it.
//!
//! [`judge`] adds the kernel lock: a record written under the kernel lock (see
//! [`Guard::Kernel`]) whose kernel lock the judge itself now holds is stale whatever the
//! classification says, because the kernel drops that lock only when its owner released it
//! or died. Every other record is classified.
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

/// One exact process generation: pid, process start token, boot id and PID namespace.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerIdentity {
    /// The process id, as seen in its own PID namespace.
    pub pid: u32,
    /// When the process started, in the platform's unit (Linux: `starttime` of
    /// `/proc/<pid>/stat`, clock ticks since boot). Distinguishes a reused pid.
    pub start_token: u64,
    /// The boot the process belongs to.
    pub boot_id: BootId,
    /// Its PID namespace (Linux: the inode number of `/proc/self/ns/pid`, the `NNN` of
    /// `pid:[NNN]`). The pid is meaningful only inside this namespace.
    pub pid_ns: u64,
}

impl fmt::Display for OwnerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} (start {}, boot {}, pid namespace {})",
            self.pid, self.start_token, self.boot_id, self.pid_ns
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

impl ProcStat {
    /// Whether this task has exited (state `Z` or `X`). A process has exited only when every
    /// one of its tasks has: a main thread that exited while other threads run is a zombie
    /// task of a live process.
    pub fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
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

/// Parses the effective uid from the text of `/proc/<pid>/status` (the second number of its
/// `Uid:` line: real, effective, saved, file system).
pub fn parse_status_euid(text: &str) -> Result<u32, IdentityError> {
    text.lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_ascii_whitespace().nth(1))
        .ok_or(IdentityError("status has no effective uid"))?
        .parse()
        .map_err(|_| IdentityError("status uid is not a number"))
}

/// Parses the inode number out of a namespace link's text (`pid:[4026531836]`).
pub fn parse_ns_link(text: &str) -> Result<u64, IdentityError> {
    text.strip_prefix("pid:[")
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or(IdentityError("namespace link is not pid:[N]"))?
        .parse()
        .map_err(|_| IdentityError("namespace inode is not a number"))
}

/// Whether the `proc` file system mounted at `/proc`, as described by the text of
/// `/proc/self/mountinfo`, may hide other users' pids (`hidepid=` other than `0`/`off`, or
/// `1`/`noaccess`, which shows the directories but refuses their content). When it may, an
/// absent pid proves nothing. The last mount at `/proc` is the visible one.
pub fn proc_hides_pids(mountinfo: &str) -> bool {
    let hiding = |line: &str| {
        // `id parent major:minor root mountpoint options [optional...] - fstype source super`
        let (left, right) = line.split_once(" - ")?;
        if left.split(' ').nth(4)? != "/proc" {
            return None;
        }
        let mut right = right.split(' ');
        if right.next()? != "proc" {
            return None;
        }
        let hides = right.nth(1)?.split(',').any(|option| {
            option
                .strip_prefix("hidepid=")
                .is_some_and(|v| !matches!(v, "0" | "off" | "1" | "noaccess"))
        });
        Some(hides)
    };
    mountinfo.lines().rev().find_map(hiding).unwrap_or(false)
}

/// What a probe saw of the process with a recorded pid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessSeen {
    /// No process has that pid.
    Absent,
    /// No process with that pid is visible, but `/proc` hides other users' processes
    /// (`hidepid`): it may well be alive.
    Hidden,
    /// A process has that pid.
    Present {
        /// Its start token.
        start_token: u64,
        /// Whether every one of its threads has exited (an unreaped zombie). A process whose
        /// main thread exited while other threads run has not.
        exited: bool,
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

/// What a probe saw of its own PID namespace (the one whose pids it can read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceSeen {
    /// The namespace's identity (see [`OwnerIdentity::pid_ns`]).
    Known(u64),
    /// It could not be read, or `/proc` belongs to another PID namespace.
    Unreadable(String),
    /// This platform has no reader.
    Unsupported,
}

/// Everything a probe reports about a recorded owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The current boot.
    pub boot: BootSeen,
    /// The PID namespace the probe reads pids in.
    pub pid_ns: NamespaceSeen,
    /// The process with the recorded pid.
    pub process: ProcessSeen,
}

/// Why a recorded owner is dead (or at least no longer holds the lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadReason {
    /// The record was written under the kernel lock, and that kernel lock is free: the kernel
    /// dropped it because its owner released it or died. (Whatever `/proc` shows.)
    KernelLockFree,
    /// No process has the owner's pid.
    NoSuchProcess,
    /// The pid belongs to a different process generation (PID reuse).
    PidReused,
    /// The owner process has exited (a zombie not yet reaped).
    Exited,
}

/// Why a recorded owner's liveness cannot be decided.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownReason {
    /// The owner lives in another PID namespace: its pid names another process here (or
    /// none), so nothing can be concluded from it.
    OtherPidNamespace {
        /// The owner's namespace.
        recorded: u64,
        /// The observer's.
        ours: u64,
    },
    /// The observer's own PID namespace could not be read (or `/proc` is not mounted for it).
    NamespaceUnreadable(String),
    /// The owner recorded another boot: a reboot since (then it is dead), or another kernel
    /// sharing this file system (then it may be alive). Nothing tells them apart from here.
    OtherBoot,
    /// The pid is not visible and `/proc` hides other processes (`hidepid`).
    Hidden,
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
            UnknownReason::OtherPidNamespace { recorded, ours } => write!(
                f,
                "the owner is in another PID namespace ({recorded}, this process is in {ours})"
            ),
            UnknownReason::NamespaceUnreadable(why) => {
                write!(f, "own PID namespace unreadable: {why}")
            }
            UnknownReason::OtherBoot => {
                f.write_str("the owner recorded another boot (a reboot, or another kernel)")
            }
            UnknownReason::Hidden => f.write_str("/proc hides other processes (hidepid)"),
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
/// | namespace | boot | process | answer |
/// |---|---|---|---|
/// | unreadable / unsupported | any | any | `Unknown` |
/// | differs | any | any | `Unknown(OtherPidNamespace)` |
/// | same | known, differs | any | `Unknown(OtherBoot)` |
/// | same | any other | absent | `Dead(NoSuchProcess)` |
/// | same | any other | hidden (`hidepid`) | `Unknown(Hidden)` |
/// | same | any other | present, other start token | `Dead(PidReused)` |
/// | same | any other | present, same token, every thread exited | `Dead(Exited)` |
/// | same | known, same | present, same token, running | `Alive` |
/// | same | unreadable / unsupported | present, same token, running | `Unknown` |
/// | same | any other | permission denied / unreadable / unsupported | `Unknown` |
///
/// A pid is read only in the namespace the owner recorded, and a start token only in the
/// boot it counts from. There, an absent pid or a different start token is dead: no process
/// of that generation exists now. A matching process is alive only when the boot is known to
/// match.
pub fn classify(recorded: &OwnerIdentity, seen: &ProbeReport) -> Ownership {
    match &seen.pid_ns {
        NamespaceSeen::Known(ours) if *ours != recorded.pid_ns => {
            return Ownership::Unknown(UnknownReason::OtherPidNamespace {
                recorded: recorded.pid_ns,
                ours: *ours,
            })
        }
        NamespaceSeen::Known(_) => {}
        NamespaceSeen::Unreadable(why) => {
            return Ownership::Unknown(UnknownReason::NamespaceUnreadable(why.clone()))
        }
        NamespaceSeen::Unsupported => return Ownership::Unknown(UnknownReason::Unsupported),
    }
    if let BootSeen::Known(boot) = &seen.boot {
        if *boot != recorded.boot_id {
            return Ownership::Unknown(UnknownReason::OtherBoot);
        }
    }
    match &seen.process {
        ProcessSeen::Absent => Ownership::Dead(DeadReason::NoSuchProcess),
        ProcessSeen::Hidden => Ownership::Unknown(UnknownReason::Hidden),
        ProcessSeen::Present { start_token, .. } if *start_token != recorded.start_token => {
            Ownership::Dead(DeadReason::PidReused)
        }
        ProcessSeen::Present { exited: true, .. } => Ownership::Dead(DeadReason::Exited),
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

/// Judges what `owner` wrote under `guard` (a record at a lock name, or a temp file), by an
/// acquirer that holds the kernel lock (`kernel_lock_held`) or runs without one (record-only
/// mode). What was written under the kernel lock ([`Guard::Kernel`]) is stale once its judge
/// holds that kernel lock, whatever `/proc` shows: `Dead(KernelLockFree)`, and `observe` is
/// not called. Everything else — written in record-only mode, or judged without the kernel
/// lock — is [`classify`]d from what `observe` reports.
pub fn judge(
    owner: &OwnerIdentity,
    guard: Guard,
    kernel_lock_held: bool,
    observe: impl FnOnce() -> ProbeReport,
) -> Ownership {
    judge_unobserved(guard, kernel_lock_held).unwrap_or_else(|| classify(owner, &observe()))
}

/// The part of [`judge`] that needs no observation of the owner: `Some(Dead(KernelLockFree))`
/// for what was written under the kernel lock its judge now holds; `None` when the owner must
/// be observed and [`classify`]d.
pub fn judge_unobserved(guard: Guard, kernel_lock_held: bool) -> Option<Ownership> {
    (kernel_lock_held && guard == Guard::Kernel)
        .then_some(Ownership::Dead(DeadReason::KernelLockFree))
}

/// Why a project directory is refused as the home of a lock, if it is: it must belong to
/// the calling user (`dir_uid == our_uid`) and be writable by no one else (no group or other
/// write bit in `mode`), or another local user could plant a lock naming their own live
/// process, or remove the kernel lock file under a holder.
pub fn refuse_lock_dir(dir_uid: u32, our_uid: u32, mode: u32) -> Option<&'static str> {
    if dir_uid != our_uid {
        Some("is not owned by this user")
    } else if mode & 0o022 != 0 {
        Some("is writable by group or others")
    } else {
        None
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

    /// The nonce written as 64 lowercase hex characters ([`Self::to_hex`]); `None` for
    /// anything else.
    pub fn parse_hex(text: &str) -> Option<Self> {
        crate::hex::decode32(text).map(LockNonce)
    }
}

/// What excluded other writers when a record was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Guard {
    /// The writer held the kernel lock (an `flock` the kernel drops when its owner dies) from
    /// before the record was written until after it is removed.
    Kernel,
    /// Record-only mode (a file system that refuses locks, explicitly allowed by the host):
    /// the record alone, judged by classifying its owner.
    RecordOnly,
}

impl Guard {
    /// Its name in a record (and in a temp file's name).
    pub fn as_str(self) -> &'static str {
        match self {
            Guard::Kernel => "kernel",
            Guard::RecordOnly => "record-only",
        }
    }

    /// The guard named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "kernel" => Some(Guard::Kernel),
            "record-only" => Some(Guard::RecordOnly),
            _ => None,
        }
    }
}

/// The content of a lock file (and of a recovery claim): who holds it, which acquisition,
/// under which guard, since when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    /// The owner process generation.
    pub owner: OwnerIdentity,
    /// What excluded other writers when this record was written.
    pub guard: Guard,
    /// This acquisition's nonce.
    pub nonce: LockNonce,
    /// When it was acquired (wall clock; diagnostic only).
    pub acquired_at: Millis,
}

/// First line of a version-2 lock record.
pub const LOCK_RECORD_MAGIC: &str = "solewriter-project-lock v2";
/// First line of a version-1 lock record (no namespace, no guard): refused.
const LOCK_RECORD_MAGIC_V1: &str = "solewriter-project-lock v1";
/// Largest lock record accepted; a larger file is malformed.
pub const LOCK_RECORD_MAX_BYTES: usize = 512;

/// A lock file that is not a complete version-2 lock record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed lock record: {0}")]
pub struct RecordError(pub &'static str);

impl LockRecord {
    /// The exact bytes of the record: eight `key value` lines.
    pub fn encode(&self) -> String {
        format!(
            "{LOCK_RECORD_MAGIC}\npid {}\nstart {}\nboot {}\npidns {}\nguard {}\nnonce {}\nacquired_ms {}\n",
            self.owner.pid,
            self.owner.start_token,
            self.owner.boot_id,
            self.owner.pid_ns,
            self.guard.as_str(),
            self.nonce.to_hex(),
            self.acquired_at.0
        )
    }

    /// Parses exactly what [`Self::encode`] writes: the magic line, then `pid`, `start`,
    /// `boot`, `pidns`, `guard`, `nonce`, `acquired_ms` in that order, each line ending in
    /// `\n`, nothing else, at most [`LOCK_RECORD_MAX_BYTES`]. An empty or truncated file is
    /// malformed; so is a version-1 record (written by a release without the kernel lock and
    /// the namespace, so neither its guard nor its pid can be judged: an operator removes it
    /// once its owner is gone).
    pub fn parse(bytes: &[u8]) -> Result<Self, RecordError> {
        if bytes.len() > LOCK_RECORD_MAX_BYTES {
            return Err(RecordError("larger than the size bound"));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| RecordError("not UTF-8"))?;
        let body = text
            .strip_suffix('\n')
            .ok_or(RecordError("empty or not terminated by a newline"))?;
        let mut lines = body.split('\n');
        match lines.next() {
            Some(LOCK_RECORD_MAGIC) => {}
            Some(LOCK_RECORD_MAGIC_V1) => {
                return Err(RecordError(
                    "a version-1 record (no kernel lock, no PID namespace): remove it once its owner is gone",
                ))
            }
            _ => return Err(RecordError("unknown format or version")),
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
        let pid_ns = number(field("pidns")?)?;
        let guard = Guard::parse(field("guard")?)
            .ok_or(RecordError("guard is neither kernel nor record-only"))?;
        let nonce = LockNonce::parse_hex(field("nonce")?)
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
                pid_ns,
            },
            guard,
            nonce,
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

    const NS: u64 = 4_026_531_836;

    fn owner() -> OwnerIdentity {
        OwnerIdentity {
            pid: 4242,
            start_token: 777,
            boot_id: boot("0f1e2d3c-aaaa-bbbb-cccc-1234567890ab"),
            pid_ns: NS,
        }
    }

    fn present(start_token: u64, exited: bool) -> ProcessSeen {
        ProcessSeen::Present {
            start_token,
            exited,
        }
    }

    #[test]
    fn classification_table() {
        let same = BootSeen::Known(owner().boot_id);
        let other = BootSeen::Known(boot("99999999-0000-0000-0000-000000000000"));
        let unreadable = BootSeen::Unreadable("eio".into());
        let here = NamespaceSeen::Known(NS);
        use DeadReason::*;
        let rows: Vec<(NamespaceSeen, BootSeen, ProcessSeen, Ownership)> = vec![
            (
                here.clone(),
                same.clone(),
                present(777, false),
                Ownership::Alive,
            ),
            (
                here.clone(),
                same.clone(),
                ProcessSeen::Absent,
                Ownership::Dead(NoSuchProcess),
            ),
            (
                here.clone(),
                same.clone(),
                present(778, false),
                Ownership::Dead(PidReused),
            ),
            (
                here.clone(),
                same.clone(),
                present(777, true),
                Ownership::Dead(Exited),
            ),
            // Another PID namespace: its pid 1 is not our pid 1, whatever ours shows.
            (
                NamespaceSeen::Known(NS + 1),
                same.clone(),
                present(1, false),
                Ownership::Unknown(UnknownReason::OtherPidNamespace {
                    recorded: NS,
                    ours: NS + 1,
                }),
            ),
            (
                NamespaceSeen::Known(NS + 1),
                same.clone(),
                ProcessSeen::Absent,
                Ownership::Unknown(UnknownReason::OtherPidNamespace {
                    recorded: NS,
                    ours: NS + 1,
                }),
            ),
            (
                NamespaceSeen::Unreadable("no /proc".into()),
                same.clone(),
                ProcessSeen::Absent,
                Ownership::Unknown(UnknownReason::NamespaceUnreadable("no /proc".into())),
            ),
            (
                NamespaceSeen::Unsupported,
                same.clone(),
                ProcessSeen::Absent,
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
            // Another boot: a reboot, or another kernel sharing the file system.
            (
                here.clone(),
                other.clone(),
                present(777, false),
                Ownership::Unknown(UnknownReason::OtherBoot),
            ),
            (
                here.clone(),
                other.clone(),
                ProcessSeen::Absent,
                Ownership::Unknown(UnknownReason::OtherBoot),
            ),
            (
                here.clone(),
                same.clone(),
                ProcessSeen::Hidden,
                Ownership::Unknown(UnknownReason::Hidden),
            ),
            (
                here.clone(),
                unreadable.clone(),
                ProcessSeen::Absent,
                Ownership::Dead(NoSuchProcess),
            ),
            (
                here.clone(),
                unreadable.clone(),
                present(1, false),
                Ownership::Dead(PidReused),
            ),
            (
                here.clone(),
                unreadable.clone(),
                present(777, false),
                Ownership::Unknown(UnknownReason::BootUnreadable("eio".into())),
            ),
            (
                here.clone(),
                BootSeen::Unsupported,
                present(777, false),
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
            (
                here.clone(),
                same.clone(),
                ProcessSeen::PermissionDenied,
                Ownership::Unknown(UnknownReason::PermissionDenied),
            ),
            (
                here.clone(),
                same.clone(),
                ProcessSeen::Unreadable("bad".into()),
                Ownership::Unknown(UnknownReason::ProcessUnreadable("bad".into())),
            ),
            (
                here.clone(),
                same,
                ProcessSeen::Unsupported,
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
            (
                here,
                BootSeen::Unsupported,
                ProcessSeen::Unsupported,
                Ownership::Unknown(UnknownReason::Unsupported),
            ),
        ];
        for (pid_ns, boot, process, expected) in rows {
            let report = ProbeReport {
                boot,
                pid_ns,
                process,
            };
            assert_eq!(classify(&owner(), &report), expected, "{report:?}");
        }
    }

    #[test]
    fn a_kernel_guarded_record_is_stale_once_its_judge_holds_the_kernel_lock() {
        let alive = || ProbeReport {
            boot: BootSeen::Known(owner().boot_id),
            pid_ns: NamespaceSeen::Known(NS),
            process: present(777, false),
        };
        let kernel = record();
        let record_only = LockRecord {
            guard: Guard::RecordOnly,
            ..record()
        };
        // Judged under the kernel lock, a kernel-guarded record is stale without a look at
        // /proc (the probe would say alive, or in another namespace: unknown).
        let unobserved = || -> ProbeReport { panic!("a kernel-guarded record is not observed") };
        assert_eq!(
            judge(&kernel.owner, kernel.guard, true, unobserved),
            Ownership::Dead(DeadReason::KernelLockFree)
        );
        // Without the kernel lock, or for a record-only record, the owner is classified.
        assert_eq!(
            judge(&kernel.owner, kernel.guard, false, alive),
            Ownership::Alive
        );
        assert_eq!(
            judge(&record_only.owner, record_only.guard, true, alive),
            Ownership::Alive
        );
    }

    #[test]
    fn only_own_directories_writable_by_no_one_else_hold_a_lock() {
        assert_eq!(refuse_lock_dir(7, 7, 0o40700), None);
        assert_eq!(refuse_lock_dir(7, 7, 0o500), None);
        assert_eq!(refuse_lock_dir(7, 7, 0o755), None);
        assert_eq!(
            refuse_lock_dir(0, 7, 0o700),
            Some("is not owned by this user")
        );
        for mode in [0o720, 0o702, 0o777, 0o1777] {
            assert_eq!(
                refuse_lock_dir(7, 7, mode),
                Some("is writable by group or others"),
                "{mode:o}"
            );
        }
    }

    #[test]
    fn status_uids_namespace_links_and_hidepid_mounts_parse() {
        let status = "Name:\tcat\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_status_euid(status), Ok(1001));
        for bad in ["", "Uid:\t1000\n", "Uid:\t1000\tx\n"] {
            assert!(parse_status_euid(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_ns_link("pid:[4026531836]"), Ok(4_026_531_836));
        for bad in ["", "net:[1]", "pid:[x]", "pid:[1"] {
            assert!(parse_ns_link(bad).is_err(), "{bad:?}");
        }
        let line = |point: &str, fs: &str, opts: &str| {
            format!("22 1 0:21 / {point} rw,nosuid shared:5 - {fs} {fs} {opts}\n")
        };
        let plain = line("/proc", "proc", "rw");
        assert!(!proc_hides_pids(&plain));
        for hides in [
            "rw,hidepid=2",
            "rw,hidepid=invisible",
            "rw,hidepid=ptraceable,gid=5",
        ] {
            assert!(proc_hides_pids(&line("/proc", "proc", hides)), "{hides}");
            // Only /proc counts, and only a proc file system; the last mount there wins.
            assert!(!proc_hides_pids(&line("/mnt", "proc", hides)), "{hides}");
            assert!(!proc_hides_pids(&line("/proc", "tmpfs", hides)), "{hides}");
            let shadowed = format!("{}{plain}", line("/proc", "proc", hides));
            assert!(!proc_hides_pids(&shadowed), "{hides}");
        }
        for shown in [
            "rw,hidepid=0",
            "rw,hidepid=off",
            "rw,hidepid=1",
            "rw,hidepid=noaccess",
        ] {
            assert!(!proc_hides_pids(&line("/proc", "proc", shown)), "{shown}");
        }
        assert!(!proc_hides_pids("garbage\n"));
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
            guard: Guard::Kernel,
            nonce: LockNonce::from_bytes([7; 32]),
            acquired_at: Millis(1_700_000_000_000),
        }
    }

    #[test]
    fn records_round_trip_and_only_complete_canonical_records_parse() {
        let text = record().encode();
        assert_eq!(LockRecord::parse(text.as_bytes()), Ok(record()));
        let record_only = LockRecord {
            guard: Guard::RecordOnly,
            ..record()
        };
        let encoded = record_only.encode();
        assert!(encoded.contains("\nguard record-only\n"), "{encoded}");
        assert_eq!(LockRecord::parse(encoded.as_bytes()), Ok(record_only));
        // Every strict prefix is a torn write: refused, never read as some owner.
        for cut in 0..text.len() {
            assert!(LockRecord::parse(&text.as_bytes()[..cut]).is_err(), "{cut}");
        }
        // A version-1 record (no namespace, no guard) is refused, saying so.
        let v1 = "solewriter-project-lock v1\npid 1\nstart 2\nboot ab\nnonce 00\nacquired_ms 1\n";
        let err = LockRecord::parse(v1.as_bytes()).unwrap_err();
        assert!(err.0.contains("version-1"), "{err}");
        let variants = [
            text.replace("v2", "v3"),
            text.replace("guard kernel", "guard none"),
            text.replace("pidns 4026531836", "pidns x"),
            text.replace("\npidns 4026531836", ""),
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
