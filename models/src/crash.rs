//! The crash-consistency model of the file system: what survives a power loss.
//!
//! Every inode keeps two views. A file has its *volatile* bytes (what a live reader sees)
//! and its *durable* bytes (what `fsync(file)` last made durable); a directory has volatile
//! and durable entry maps (`fsync(dir)` makes the entries — creations, renames, removals —
//! durable). Inodes are never freed, so a durable entry always resolves.
//!
//! A crash keeps the durable state, and the kernel may have written back any part of what
//! was not yet synced: for every dirty inode independently, a crash keeps its durable view,
//! its volatile view, or (for a file) a torn prefix of its volatile bytes. [`CrashFs::crash`]
//! enumerates every such outcome, so "losing every unsynced write" is one of them and
//! "the rename reached the disk but the data did not" is another.
//!
//! [`publish_ops`] is the atomic publisher's sequence (`files/src/atomic_file.rs`, run by
//! `files/src/steps.rs`): create the target directory if needed and fsync its parent; create
//! a temp sibling, write it, fsync it; give the document in place a second name, if there is
//! one; rename over `current.json`; remove the replaced document's second name; fsync the
//! directory. [`check_publication`]
//! crashes it after every prefix and checks that `current.json` is the old complete document
//! or the new complete one — and the new one once the publisher has reported success.
//!
//! [`lock_ops`] is the project lock's creation sequence (`project_lock/src/lib.rs`:
//! write the record to a temp sibling and fsync it, hard-link it to `project.lock`, remove the
//! temp name). [`check_lock_creation`] crashes it after every prefix and checks that the lock
//! file is absent or the complete record — never empty or torn, which would make every later
//! acquirer fail on a malformed lock. (A lock lost to a crash is allowed: a power loss ends
//! its owner's boot, so the owner is dead either way.)

use std::collections::BTreeMap;

/// The name of the published file.
pub const CURRENT: &str = "current.json";
/// The name of the temp sibling in the model (the adapter's is unique per write).
pub const TEMP: &str = ".current.json.tmp-0";
/// The replaced document's second name in the model (the adapter's is the temp's name and
/// `.old`).
pub const KEPT: &str = ".current.json.tmp-0.old";
/// The target directory's name under the root.
pub const TARGET_DIR: &str = "target";

#[derive(Clone, Debug, PartialEq, Eq)]
enum Inode {
    File {
        volatile: Vec<u8>,
        durable: Vec<u8>,
    },
    Dir {
        volatile: BTreeMap<String, usize>,
        durable: BTreeMap<String, usize>,
    },
}

impl Inode {
    fn dirty(&self) -> bool {
        match self {
            Inode::File { volatile, durable } => volatile != durable,
            Inode::Dir { volatile, durable } => volatile != durable,
        }
    }

    /// What a crash may leave of this inode (its volatile view becomes that state).
    fn crash_outcomes(&self) -> Vec<Inode> {
        let settle = |inode: Inode| match inode {
            Inode::File { volatile, .. } => Inode::File {
                durable: volatile.clone(),
                volatile,
            },
            Inode::Dir { volatile, .. } => Inode::Dir {
                durable: volatile.clone(),
                volatile,
            },
        };
        let mut outcomes = match self {
            Inode::File { volatile, durable } => {
                let mut v = vec![durable.clone(), volatile.clone()];
                if volatile.len() > 1 {
                    v.push(volatile[..volatile.len() / 2].to_vec());
                }
                v.into_iter()
                    .map(|bytes| Inode::File {
                        volatile: bytes,
                        durable: Vec::new(),
                    })
                    .collect::<Vec<_>>()
            }
            Inode::Dir { volatile, durable } => vec![durable.clone(), volatile.clone()]
                .into_iter()
                .map(|entries| Inode::Dir {
                    volatile: entries,
                    durable: BTreeMap::new(),
                })
                .collect(),
        };
        if !self.dirty() {
            outcomes.truncate(1);
        }
        outcomes.dedup();
        outcomes.into_iter().map(settle).collect()
    }
}

/// Why a model file-system operation failed (a misuse of the model, as the OS would refuse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsError {
    /// A path component does not exist.
    NotFound(String),
    /// `create_new` / `mkdir` on an existing name.
    Exists(String),
    /// A directory operation on a file or a file operation on a directory.
    WrongKind(String),
}

/// The model file system: a root directory (always durable) and the inodes below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashFs {
    inodes: Vec<Inode>,
}

impl Default for CrashFs {
    fn default() -> Self {
        CrashFs {
            inodes: vec![Inode::Dir {
                volatile: BTreeMap::new(),
                durable: BTreeMap::new(),
            }],
        }
    }
}

impl CrashFs {
    fn lookup(&self, path: &[&str]) -> Result<usize, FsError> {
        let mut at = 0;
        for name in path {
            match &self.inodes[at] {
                Inode::Dir { volatile, .. } => {
                    at = *volatile
                        .get(*name)
                        .ok_or_else(|| FsError::NotFound(name.to_string()))?;
                }
                Inode::File { .. } => return Err(FsError::WrongKind(name.to_string())),
            }
        }
        Ok(at)
    }

    fn entries(&mut self, dir: &[&str]) -> Result<&mut BTreeMap<String, usize>, FsError> {
        let at = self.lookup(dir)?;
        match &mut self.inodes[at] {
            Inode::Dir { volatile, .. } => Ok(volatile),
            Inode::File { .. } => Err(FsError::WrongKind(dir.join("/"))),
        }
    }

    fn link_new(&mut self, dir: &[&str], name: &str, inode: Inode) -> Result<(), FsError> {
        let id = self.inodes.len();
        let entries = self.entries(dir)?;
        if entries.contains_key(name) {
            return Err(FsError::Exists(name.into()));
        }
        entries.insert(name.into(), id);
        self.inodes.push(inode);
        Ok(())
    }

    /// `mkdir(dir/name)`: a new empty directory, its entry volatile.
    pub fn mkdir(&mut self, dir: &[&str], name: &str) -> Result<(), FsError> {
        let empty = BTreeMap::new();
        self.link_new(
            dir,
            name,
            Inode::Dir {
                volatile: empty.clone(),
                durable: empty,
            },
        )
    }

    /// `open(dir/name, O_CREAT | O_EXCL)`: a new empty file, its entry volatile.
    pub fn create_new(&mut self, dir: &[&str], name: &str) -> Result<(), FsError> {
        self.link_new(
            dir,
            name,
            Inode::File {
                volatile: Vec::new(),
                durable: Vec::new(),
            },
        )
    }

    /// Appends `bytes` to the file at `path` (volatile).
    pub fn write(&mut self, path: &[&str], bytes: &[u8]) -> Result<(), FsError> {
        let at = self.lookup(path)?;
        match &mut self.inodes[at] {
            Inode::File { volatile, .. } => {
                volatile.extend_from_slice(bytes);
                Ok(())
            }
            Inode::Dir { .. } => Err(FsError::WrongKind(path.join("/"))),
        }
    }

    /// `fsync(path)`: a file's bytes, or a directory's entries, become durable.
    pub fn fsync(&mut self, path: &[&str]) -> Result<(), FsError> {
        let at = self.lookup(path)?;
        match &mut self.inodes[at] {
            Inode::File { volatile, durable } => *durable = volatile.clone(),
            Inode::Dir { volatile, durable } => *durable = volatile.clone(),
        }
        Ok(())
    }

    /// `rename(dir/from, dir/to)`: atomically replaces the entry `to` (volatile).
    pub fn rename(&mut self, dir: &[&str], from: &str, to: &str) -> Result<(), FsError> {
        let entries = self.entries(dir)?;
        let id = entries
            .remove(from)
            .ok_or_else(|| FsError::NotFound(from.into()))?;
        entries.insert(to.into(), id);
        Ok(())
    }

    /// `link(dir/from, dir/to)`: a second name for the same inode (volatile); fails if `to`
    /// exists.
    pub fn link(&mut self, dir: &[&str], from: &str, to: &str) -> Result<(), FsError> {
        let entries = self.entries(dir)?;
        let id = *entries
            .get(from)
            .ok_or_else(|| FsError::NotFound(from.into()))?;
        if entries.contains_key(to) {
            return Err(FsError::Exists(to.into()));
        }
        entries.insert(to.into(), id);
        Ok(())
    }

    /// `unlink(dir/name)`: removes the name (volatile); the inode lives on.
    pub fn unlink(&mut self, dir: &[&str], name: &str) -> Result<(), FsError> {
        self.entries(dir)?
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| FsError::NotFound(name.into()))
    }

    /// The bytes a live reader of `path` sees; `None` if absent.
    pub fn read(&self, path: &[&str]) -> Option<Vec<u8>> {
        match self.lookup(path).ok().map(|at| &self.inodes[at]) {
            Some(Inode::File { volatile, .. }) => Some(volatile.clone()),
            _ => None,
        }
    }

    /// Every state the file system may be in after a crash now (see the module docs).
    pub fn crash(&self) -> Vec<CrashFs> {
        let mut states = vec![self.clone()];
        for (at, inode) in self.inodes.iter().enumerate() {
            let outcomes = inode.crash_outcomes();
            states = states
                .into_iter()
                .flat_map(|state| {
                    outcomes.iter().map(move |outcome| {
                        let mut next = state.clone();
                        next.inodes[at] = outcome.clone();
                        next
                    })
                })
                .collect();
        }
        states
    }
}

/// One operation of the publisher's file-system sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FsOp {
    /// Create the target directory (first publication only).
    CreateDir,
    /// Fsync the root, making the target directory's entry durable.
    SyncParent,
    /// Create the temp sibling (`create_new`).
    CreateTemp,
    /// Write the new document into the temp sibling.
    WriteTemp,
    /// Fsync the temp sibling.
    SyncTemp,
    /// Give `current.json` a second name (a hard link named after the temp sibling), so the
    /// rename only drops one of its links (replacement only: the first has nothing to keep).
    KeepOld,
    /// Rename the temp sibling over `current.json`.
    Rename,
    /// Remove the replaced document's second name (replacement only).
    DropOld,
    /// Fsync the target directory, making the rename (and the removal) durable.
    SyncDir,
}

impl FsOp {
    /// The fsyncs of the sequence: each one is necessary ([`check_publication`] must fail
    /// without it).
    pub const SYNCS: [FsOp; 3] = [FsOp::SyncParent, FsOp::SyncTemp, FsOp::SyncDir];
}

/// The publisher's sequence, as `files/src/steps.rs` performs it: `replacing` a document in
/// place (whose directory exists), the document is kept under a second name across the
/// rename and that name removed before the directory fsync; the first publication creates the
/// target directory (and fsyncs its parent) and has nothing to keep.
pub fn publish_ops(replacing: bool) -> Vec<FsOp> {
    use FsOp::*;
    let mut ops = match replacing {
        true => vec![],
        false => vec![CreateDir, SyncParent],
    };
    ops.extend([CreateTemp, WriteTemp, SyncTemp]);
    match replacing {
        true => ops.extend([KeepOld, Rename, DropOld, SyncDir]),
        false => ops.extend([Rename, SyncDir]),
    }
    ops
}

fn apply(fs: &mut CrashFs, op: FsOp, new: &[u8]) -> Result<(), FsError> {
    let dir = [TARGET_DIR];
    match op {
        FsOp::CreateDir => fs.mkdir(&[], TARGET_DIR),
        FsOp::SyncParent => fs.fsync(&[]),
        FsOp::CreateTemp => fs.create_new(&dir, TEMP),
        FsOp::WriteTemp => fs.write(&[TARGET_DIR, TEMP], new),
        FsOp::SyncTemp => fs.fsync(&[TARGET_DIR, TEMP]),
        FsOp::KeepOld => fs.link(&dir, CURRENT, KEPT),
        FsOp::Rename => fs.rename(&dir, TEMP, CURRENT),
        FsOp::DropOld => fs.unlink(&dir, KEPT),
        FsOp::SyncDir => fs.fsync(&dir),
    }
}

/// A crash outcome that loses or tears the file checked (`current.json`, `project.lock`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashViolation {
    /// How many operations of the sequence had completed at the crash.
    pub after_ops: usize,
    /// Whether the sequence had completed (for the publisher: success was reported).
    pub acknowledged: bool,
    /// What the file checked held after the crash (`None`: absent).
    pub found: Option<Vec<u8>>,
    /// What was allowed.
    pub expected: &'static str,
}

/// What an exhaustive crash check explored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Crash points (after each prefix of the sequence, including none and all of it).
    pub crash_points: usize,
    /// Post-crash states checked over all crash points.
    pub states: usize,
    /// States in which the file checked held what it held before the sequence (the old
    /// document; absent for a first publication or a lock).
    pub old: usize,
    /// States in which it held what the sequence writes (the new document, the lock record).
    pub new: usize,
}

/// Runs `ops` on `fs`, crashes after every prefix (none, each, all) in every possible way,
/// and lets `judge(ops_done, acknowledged, state)` rule on each post-crash state: `Ok(true)`
/// for the new state, `Ok(false)` for the old one, or the violation.
fn explore<Op: Copy>(
    mut fs: CrashFs,
    ops: &[Op],
    apply: impl Fn(&mut CrashFs, Op) -> Result<(), FsError>,
    judge: impl Fn(usize, bool, &CrashFs) -> Result<bool, CrashViolation>,
) -> Result<CrashReport, CrashViolation> {
    let mut report = CrashReport::default();
    for done in 0..=ops.len() {
        if done > 0 {
            apply(&mut fs, ops[done - 1]).map_err(|e| model_error(done, e))?;
        }
        report.crash_points += 1;
        for after in fs.crash() {
            report.states += 1;
            if judge(done, done == ops.len(), &after)? {
                report.new += 1;
            } else {
                report.old += 1;
            }
        }
    }
    Ok(report)
}

/// A model operation the OS would have refused: the sequence itself is wrong.
fn model_error(after_ops: usize, e: FsError) -> CrashViolation {
    CrashViolation {
        after_ops,
        acknowledged: false,
        found: None,
        expected: match e {
            FsError::NotFound(_) => "an operation on an existing path",
            FsError::Exists(_) => "a create on a free name",
            FsError::WrongKind(_) => "an operation on the right kind of inode",
        },
    }
}

/// Runs `ops` (from a file system where `old`, if any, is durably published), crashes after
/// every prefix in every possible way, and checks `current.json`: before the publisher
/// reports success it must be the old complete document (absent if none) or the new
/// complete one; after it, the new one.
pub fn check_publication(
    ops: &[FsOp],
    old: Option<&[u8]>,
    new: &[u8],
) -> Result<CrashReport, CrashViolation> {
    let mut fs = CrashFs::default();
    let setup = |fs: &mut CrashFs| -> Result<(), FsError> {
        if let Some(old) = old {
            fs.mkdir(&[], TARGET_DIR)?;
            fs.fsync(&[])?;
            fs.create_new(&[TARGET_DIR], CURRENT)?;
            fs.write(&[TARGET_DIR, CURRENT], old)?;
            fs.fsync(&[TARGET_DIR, CURRENT])?;
            fs.fsync(&[TARGET_DIR])?;
        }
        Ok(())
    };
    setup(&mut fs).map_err(|e| model_error(0, e))?;
    explore(
        fs,
        ops,
        |fs, op| apply(fs, op, new),
        |done, acknowledged, after| {
            let found = after.read(&[TARGET_DIR, CURRENT]);
            let is_new = found.as_deref() == Some(new);
            let is_old = found.as_deref() == old;
            match (is_new, is_old, acknowledged) {
                (true, _, _) => Ok(true),
                (false, true, false) => Ok(false),
                _ => Err(CrashViolation {
                    after_ops: done,
                    acknowledged,
                    found,
                    expected: if acknowledged {
                        "the new complete document (publication reported success)"
                    } else {
                        "the old complete document, or the new complete one"
                    },
                }),
            }
        },
    )
}

/// The name of the lock file in the model.
pub const LOCK: &str = "project.lock";
/// The name of the lock's temp sibling in the model (the adapter's is unique per write).
pub const LOCK_TEMP: &str = ".project.lock.tmp-0";
/// The project directory's name under the root.
pub const LOCK_DIR: &str = "project";

/// One operation of the project lock's creation sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOp {
    /// Create the temp sibling (`create_new`).
    CreateTemp,
    /// Write the record into it.
    WriteTemp,
    /// Fsync it.
    SyncTemp,
    /// Hard-link it to `project.lock` (fails if a lock exists).
    Link,
    /// Remove the temp name; the lock name keeps the inode.
    RemoveTemp,
}

impl LockOp {
    /// The fsyncs of the sequence: each one is necessary ([`check_lock_creation`] must fail
    /// without it).
    pub const SYNCS: [LockOp; 1] = [LockOp::SyncTemp];
}

/// The lock's creation sequence, as `project_lock/src/lib.rs` performs it in an existing
/// project directory with no lock.
pub fn lock_ops() -> Vec<LockOp> {
    vec![
        LockOp::CreateTemp,
        LockOp::WriteTemp,
        LockOp::SyncTemp,
        LockOp::Link,
        LockOp::RemoveTemp,
    ]
}

fn apply_lock(fs: &mut CrashFs, op: LockOp, record: &[u8]) -> Result<(), FsError> {
    let dir = [LOCK_DIR];
    match op {
        LockOp::CreateTemp => fs.create_new(&dir, LOCK_TEMP),
        LockOp::WriteTemp => fs.write(&[LOCK_DIR, LOCK_TEMP], record),
        LockOp::SyncTemp => fs.fsync(&[LOCK_DIR, LOCK_TEMP]),
        LockOp::Link => fs.link(&dir, LOCK_TEMP, LOCK),
        LockOp::RemoveTemp => fs.unlink(&dir, LOCK_TEMP),
    }
}

/// Runs `ops` in a durable project directory without a lock, crashes after every prefix in
/// every possible way, and checks `project.lock`: absent, or exactly `record`.
pub fn check_lock_creation(ops: &[LockOp], record: &[u8]) -> Result<CrashReport, CrashViolation> {
    let mut fs = CrashFs::default();
    fs.mkdir(&[], LOCK_DIR)
        .and_then(|()| fs.fsync(&[]))
        .map_err(|e| model_error(0, e))?;
    explore(
        fs,
        ops,
        |fs, op| apply_lock(fs, op, record),
        |done, acknowledged, after| match after.read(&[LOCK_DIR, LOCK]) {
            None => Ok(false),
            Some(found) if found == record => Ok(true),
            found => Err(CrashViolation {
                after_ops: done,
                acknowledged,
                found,
                expected: "no lock file, or the complete record",
            }),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_durable_state_and_may_keep_any_unsynced_part() {
        let mut fs = CrashFs::default();
        fs.mkdir(&[], "d").unwrap();
        fs.fsync(&[]).unwrap();
        fs.create_new(&["d"], "f").unwrap();
        fs.write(&["d", "f"], b"abcd").unwrap();
        let reads: Vec<_> = fs.crash().iter().map(|s| s.read(&["d", "f"])).collect();
        assert!(reads.contains(&None), "unsynced entry lost");
        assert!(reads.contains(&Some(Vec::new())), "entry kept, data lost");
        assert!(reads.contains(&Some(b"ab".to_vec())), "torn data");
        assert!(reads.contains(&Some(b"abcd".to_vec())), "all written back");
        fs.fsync(&["d", "f"]).unwrap();
        fs.fsync(&["d"]).unwrap();
        let reads: Vec<_> = fs.crash().iter().map(|s| s.read(&["d", "f"])).collect();
        assert_eq!(reads, vec![Some(b"abcd".to_vec())], "synced state is kept");
    }

    #[test]
    fn a_link_is_a_second_name_whose_entry_a_crash_may_lose() {
        let mut fs = CrashFs::default();
        fs.mkdir(&[], "d").unwrap();
        fs.fsync(&[]).unwrap();
        fs.create_new(&["d"], "t").unwrap();
        fs.write(&["d", "t"], b"abcd").unwrap();
        fs.fsync(&["d", "t"]).unwrap();
        assert_eq!(fs.link(&["d"], "t", "t"), Err(FsError::Exists("t".into())));
        fs.link(&["d"], "t", "l").unwrap();
        fs.unlink(&["d"], "t").unwrap();
        assert_eq!(fs.read(&["d", "l"]), Some(b"abcd".to_vec()));
        assert_eq!(fs.read(&["d", "t"]), None);
        let reads: Vec<_> = fs.crash().iter().map(|s| s.read(&["d", "l"])).collect();
        assert!(reads.contains(&None), "unsynced link lost");
        assert!(reads.iter().flatten().all(|r| r == b"abcd"), "{reads:?}");
        fs.fsync(&["d"]).unwrap();
        let reads: Vec<_> = fs.crash().iter().map(|s| s.read(&["d", "l"])).collect();
        assert_eq!(reads, vec![Some(b"abcd".to_vec())]);
    }
}
