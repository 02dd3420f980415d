//! Reading process identities from the OS: the [`ProcessProbe`] seam and its system
//! implementation. On Linux the start token is `starttime` of `/proc/<pid>/stat`, the boot
//! id is `/proc/sys/kernel/random/boot_id` and the PID namespace is the inode of
//! `/proc/self/ns/pid`; parsing and classification are pure core decisions
//! (`solewriter_core::project_lock::ownership`). Elsewhere every answer is `Unsupported`, so a recorded
//! owner is `Unknown` and the project lock fails loudly instead of guessing.
//!
//! A process has exited only when every one of its threads has: when the main thread's state
//! is `Z`, the threads under `/proc/<pid>/task` are read too. An absent pid is reported
//! `Hidden`, not `Absent`, when `/proc` is mounted with `hidepid` (then absence proves
//! nothing). Pids are read in the PID namespace `/proc` belongs to; if that is not this
//! process's own (`/proc/self/stat` names another pid than ours), the namespace is reported
//! unreadable and no pid is judged.

use solewriter_core::project_lock::ownership::{
    BootSeen, NamespaceSeen, OwnerIdentity, ProbeReport, ProcessSeen,
};

/// What the project lock asks of the OS about processes. Tests implement it to present
/// permission-denied and PID-reuse cases.
pub trait ProcessProbe: Send + Sync {
    /// The identity of the calling process, or why it cannot be read.
    fn current(&self) -> Result<OwnerIdentity, String>;
    /// What the OS shows now of the process `pid` and of the current boot.
    fn observe(&self, pid: u32) -> ProbeReport;
}

/// The probe of the running OS.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemProbe;

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use solewriter_core::project_lock::ownership::{
        parse_ns_link, parse_proc_stat, parse_status_euid, proc_hides_pids, BootId, ProcStat,
    };
    use std::io;

    const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
    const OWN_NS: &str = "/proc/self/ns/pid";
    const MOUNTINFO: &str = "/proc/self/mountinfo";
    /// `ESRCH`: a process that exits while its `/proc` entry is read.
    const ESRCH: i32 = 3;

    pub(super) fn boot() -> BootSeen {
        match std::fs::read_to_string(BOOT_ID) {
            Ok(text) => match BootId::parse(&text) {
                Ok(id) => BootSeen::Known(id),
                Err(e) => BootSeen::Unreadable(e.to_string()),
            },
            Err(e) => BootSeen::Unreadable(format!("{BOOT_ID}: {e}")),
        }
    }

    /// This process's PID namespace, provided `/proc` shows pids in it.
    pub(super) fn pid_ns() -> NamespaceSeen {
        let own = std::process::id();
        match std::fs::read_to_string("/proc/self/stat").map(|t| parse_proc_stat(&t)) {
            Ok(Ok(stat)) if stat.pid == own => {}
            Ok(Ok(stat)) => {
                return NamespaceSeen::Unreadable(format!(
                    "/proc belongs to another PID namespace (it calls this process {}, not {own})",
                    stat.pid
                ))
            }
            Ok(Err(e)) => return NamespaceSeen::Unreadable(format!("/proc/self/stat: {e}")),
            Err(e) => return NamespaceSeen::Unreadable(format!("/proc/self/stat: {e}")),
        }
        match std::fs::read_link(OWN_NS) {
            Ok(link) => match parse_ns_link(&link.to_string_lossy()) {
                Ok(ns) => NamespaceSeen::Known(ns),
                Err(e) => NamespaceSeen::Unreadable(format!("{OWN_NS}: {e}")),
            },
            Err(e) => NamespaceSeen::Unreadable(format!("{OWN_NS}: {e}")),
        }
    }

    pub(super) fn effective_uid() -> Result<u32, String> {
        let path = "/proc/self/status";
        let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        parse_status_euid(&text).map_err(|e| format!("{path}: {e}"))
    }

    fn stat(path: &str) -> io::Result<Result<ProcStat, String>> {
        let text = std::fs::read_to_string(path)?;
        Ok(parse_proc_stat(&text).map_err(|e| format!("{path}: {e}")))
    }

    /// Whether every thread of `pid` has exited. A thread gone between the listing and its
    /// read has exited; any other failure to read is `Err`.
    fn every_thread_exited(pid: u32) -> Result<bool, String> {
        let dir = format!("/proc/{pid}/task");
        let tasks = std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))?;
        for task in tasks {
            let task = task.map_err(|e| format!("{dir}: {e}"))?;
            let path = format!("{}/stat", task.path().display());
            match stat(&path) {
                Ok(Ok(s)) if !s.exited() => return Ok(false),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e),
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ESRCH) => {}
                Err(e) => return Err(format!("{path}: {e}")),
            }
        }
        Ok(true)
    }

    pub(super) fn process(pid: u32) -> ProcessSeen {
        let path = format!("/proc/{pid}/stat");
        match stat(&path) {
            Ok(Ok(stat)) if stat.pid == pid => {
                let exited = if stat.exited() {
                    match every_thread_exited(pid) {
                        Ok(exited) => exited,
                        Err(e) => return ProcessSeen::Unreadable(e),
                    }
                } else {
                    false
                };
                ProcessSeen::Present {
                    start_token: stat.start_token,
                    exited,
                }
            }
            Ok(Ok(_)) => ProcessSeen::Unreadable(format!("{path} names another pid")),
            Ok(Err(e)) => ProcessSeen::Unreadable(e),
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ESRCH) => {
                match std::fs::read_to_string(MOUNTINFO) {
                    Ok(text) if proc_hides_pids(&text) => ProcessSeen::Hidden,
                    Ok(_) => ProcessSeen::Absent,
                    Err(e) => ProcessSeen::Unreadable(format!("{MOUNTINFO}: {e}")),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => ProcessSeen::PermissionDenied,
            Err(e) => ProcessSeen::Unreadable(format!("{path}: {e}")),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    pub(super) fn boot() -> BootSeen {
        BootSeen::Unsupported
    }

    pub(super) fn pid_ns() -> NamespaceSeen {
        NamespaceSeen::Unsupported
    }

    pub(super) fn effective_uid() -> Result<u32, String> {
        Err("no effective uid reader on this platform".into())
    }

    pub(super) fn process(_pid: u32) -> ProcessSeen {
        ProcessSeen::Unsupported
    }
}

/// The effective uid of the calling process (Linux: `/proc/self/status`), or why it cannot
/// be read.
pub fn effective_uid() -> Result<u32, String> {
    imp::effective_uid()
}

impl ProcessProbe for SystemProbe {
    fn current(&self) -> Result<OwnerIdentity, String> {
        let pid = std::process::id();
        let boot_id = match imp::boot() {
            BootSeen::Known(id) => id,
            BootSeen::Unreadable(why) => return Err(why),
            BootSeen::Unsupported => return Err("no boot id reader on this platform".into()),
        };
        let pid_ns = match imp::pid_ns() {
            NamespaceSeen::Known(ns) => ns,
            NamespaceSeen::Unreadable(why) => return Err(why),
            NamespaceSeen::Unsupported => {
                return Err("no PID namespace reader on this platform".into())
            }
        };
        match imp::process(pid) {
            ProcessSeen::Present { start_token, .. } => Ok(OwnerIdentity {
                pid,
                start_token,
                boot_id,
                pid_ns,
            }),
            other => Err(format!("own process identity unreadable: {other:?}")),
        }
    }

    fn observe(&self, pid: u32) -> ProbeReport {
        ProbeReport {
            boot: imp::boot(),
            pid_ns: imp::pid_ns(),
            process: imp::process(pid),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use solewriter_core::project_lock::ownership::{classify, Ownership};

    #[test]
    fn own_identity_is_alive_and_a_reaped_child_is_dead() {
        let me = SystemProbe.current().unwrap();
        assert_eq!(
            classify(&me, &SystemProbe.observe(me.pid)),
            Ownership::Alive
        );
        let mut child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let recorded = OwnerIdentity {
            pid: child.id(),
            ..me.clone()
        };
        let ProcessSeen::Present { start_token, .. } = SystemProbe.observe(child.id()).process
        else {
            panic!("a running child is visible");
        };
        let recorded = OwnerIdentity {
            start_token,
            ..recorded
        };
        let seen = SystemProbe.observe(recorded.pid);
        assert_eq!(classify(&recorded, &seen), Ownership::Alive);
        drop(child.stdin.take());
        child.wait().unwrap();
        let seen = SystemProbe.observe(recorded.pid);
        assert!(
            matches!(classify(&recorded, &seen), Ownership::Dead(_)),
            "{seen:?}"
        );
    }

    #[test]
    fn an_exited_unreaped_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let me = SystemProbe.current().unwrap();
        // Until the child has exited it is running; a reaped child would be absent. Poll
        // (bounded) for the zombie state while it is not reaped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let seen = loop {
            let seen = SystemProbe.observe(child.id());
            if matches!(seen.process, ProcessSeen::Present { exited: true, .. })
                || std::time::Instant::now() > deadline
            {
                break seen;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        let ProcessSeen::Present { start_token, .. } = seen.process else {
            panic!("unreaped child is visible: {seen:?}");
        };
        let recorded = OwnerIdentity {
            pid: child.id(),
            start_token,
            ..me
        };
        assert_eq!(
            classify(&recorded, &seen),
            Ownership::Dead(solewriter_core::project_lock::ownership::DeadReason::Exited)
        );
        child.wait().unwrap();
    }
}
