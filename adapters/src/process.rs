//! Reading process identities from the OS: the [`ProcessProbe`] seam and its system
//! implementation. On Linux the start token is `starttime` of `/proc/<pid>/stat` and the boot
//! id is `/proc/sys/kernel/random/boot_id`; parsing and classification are pure core
//! decisions (`solewriter_core::ownership`). Elsewhere every answer is `Unsupported`, so a
//! recorded owner is `Unknown` and the project lock fails loudly instead of guessing.

use solewriter_core::ownership::{BootSeen, OwnerIdentity, ProbeReport, ProcessSeen};

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
    use solewriter_core::ownership::{parse_proc_stat, BootId};
    use std::io;

    const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
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

    pub(super) fn process(pid: u32) -> ProcessSeen {
        let path = format!("/proc/{pid}/stat");
        match std::fs::read_to_string(&path) {
            Ok(text) => match parse_proc_stat(&text) {
                Ok(stat) if stat.pid == pid => ProcessSeen::Present {
                    start_token: stat.start_token,
                    zombie: matches!(stat.state, 'Z' | 'X'),
                },
                Ok(_) => ProcessSeen::Unreadable(format!("{path} names another pid")),
                Err(e) => ProcessSeen::Unreadable(format!("{path}: {e}")),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ESRCH) => {
                ProcessSeen::Absent
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

    pub(super) fn process(_pid: u32) -> ProcessSeen {
        ProcessSeen::Unsupported
    }
}

impl ProcessProbe for SystemProbe {
    fn current(&self) -> Result<OwnerIdentity, String> {
        let pid = std::process::id();
        let boot_id = match imp::boot() {
            BootSeen::Known(id) => id,
            BootSeen::Unreadable(why) => return Err(why),
            BootSeen::Unsupported => return Err("no boot id reader on this platform".into()),
        };
        match imp::process(pid) {
            ProcessSeen::Present { start_token, .. } => Ok(OwnerIdentity {
                pid,
                start_token,
                boot_id,
            }),
            other => Err(format!("own process identity unreadable: {other:?}")),
        }
    }

    fn observe(&self, pid: u32) -> ProbeReport {
        ProbeReport {
            boot: imp::boot(),
            process: imp::process(pid),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use solewriter_core::ownership::{classify, Ownership};

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
            if matches!(seen.process, ProcessSeen::Present { zombie: true, .. })
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
            Ownership::Dead(solewriter_core::ownership::DeadReason::Exited)
        );
        child.wait().unwrap();
    }
}
