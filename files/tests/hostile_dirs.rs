//! The atomic publisher's own steps against a file system that answers badly or a directory
//! someone else plants names in: a directory creation that fails or whose directory vanishes
//! ends with a typed error (never a loop), and a file planted at a temp file's exact name
//! (the random source made predictable) is never written through; a runtime root that is no
//! directory is refused, and a fresh one holds no document.

use solewriter_core::projection::target::TargetId;
use solewriter_files::atomic_file::{
    make_private_dir, DirError, DirHandle, FileSystem, RealFs, TempFile,
};
use solewriter_files::runtime::RuntimeRoot;
use solewriter_files::steps::{DurableDirs, FileSteps};
use solewriter_files::FileError;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::Duration;

/// The real file system, but for the directory creation (and a fixed random source).
struct Answering {
    create_dir: fn(&DirHandle, &str) -> io::Result<()>,
    creations: AtomicUsize,
}

impl FileSystem for Answering {
    fn create_dir(&self, parent: &DirHandle, name: &str) -> io::Result<()> {
        self.creations.fetch_add(1, SeqCst);
        (self.create_dir)(parent, name)
    }
    fn create_new(&self, dir: &DirHandle, name: &str) -> io::Result<File> {
        RealFs.create_new(dir, name)
    }
    fn write_all(&self, file: &mut File, bytes: &[u8]) -> io::Result<()> {
        RealFs.write_all(file, bytes)
    }
    fn sync_file(&self, file: &File) -> io::Result<()> {
        RealFs.sync_file(file)
    }
    fn rename(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        RealFs.rename(dir, from, to)
    }
    fn sync_dir(&self, dir: &DirHandle) -> io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn remove_file(&self, dir: &DirHandle, name: &str) -> io::Result<()> {
        RealFs.remove_file(dir, name)
    }
    fn hard_link(&self, dir: &DirHandle, from: &str, to: &str) -> io::Result<()> {
        RealFs.hard_link(dir, from, to)
    }
    fn fill_random(&self, bytes: &mut [u8]) -> io::Result<()> {
        bytes.fill(0xab);
        Ok(())
    }
}

/// `make_private_dir` on `fs`, in a thread: a regression that loops fails the test after 10 s
/// instead of hanging it.
fn make_in_time(fs: &'static Answering, parent: DirHandle) -> Result<bool, DirError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(make_private_dir(fs, &parent, "target").map(|(_, created)| created));
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("make_private_dir answered within 10 s (no loop)")
}

#[test]
fn a_directory_creation_that_fails_or_whose_directory_vanishes_is_an_error_not_a_loop() {
    let scratch = tempfile::tempdir().unwrap();
    let parent = DirHandle::open(scratch.path()).unwrap();
    // No space: the error itself, once.
    let full: &'static Answering = Box::leak(Box::new(Answering {
        create_dir: |_, _| Err(io::Error::from_raw_os_error(libc::ENOSPC)),
        creations: AtomicUsize::new(0),
    }));
    match make_in_time(full, parent.clone()) {
        Err(DirError::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("{other:?}"),
    }
    assert_eq!(full.creations.load(SeqCst), 1);
    // Created, then gone before it could be opened (another process removed it): not found,
    // after one creation — not created again and again.
    let vanishing: &'static Answering = Box::leak(Box::new(Answering {
        create_dir: |_, _| Ok(()),
        creations: AtomicUsize::new(0),
    }));
    match make_in_time(vanishing, parent.clone()) {
        Err(DirError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
        other => panic!("{other:?}"),
    }
    assert_eq!(vanishing.creations.load(SeqCst), 1);
    // Created by another writer meanwhile: opened as it is.
    let raced: &'static Answering = Box::leak(Box::new(Answering {
        create_dir: |parent, name| {
            std::fs::create_dir(parent.join(name)).unwrap();
            Err(io::Error::from_raw_os_error(libc::EEXIST))
        },
        creations: AtomicUsize::new(0),
    }));
    assert!(matches!(make_in_time(raced, parent), Ok(false)));
}

#[test]
fn a_file_planted_at_a_temp_files_exact_name_is_never_written_through() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let outside = scratch.path().join("outside");
    std::fs::write(&outside, b"someone else's").unwrap();
    // The random source answers 0xab bytes, so the temp's name is known in advance.
    let name = format!(".current.json.tmp-{}", "ab".repeat(8));
    std::os::unix::fs::symlink(&outside, dir.join(&name)).unwrap();
    let fs: &'static Answering = Box::leak(Box::new(Answering {
        create_dir: |_, _| unreachable!(),
        creations: AtomicUsize::new(0),
    }));
    let held = DirHandle::open(&dir).unwrap();
    let err = TempFile::write(fs, &held, "current.json", b"the document").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(std::fs::read(&outside).unwrap(), b"someone else's");
    // A plain file planted there is not overwritten either.
    std::fs::remove_file(dir.join(&name)).unwrap();
    std::fs::write(dir.join(&name), b"planted").unwrap();
    assert!(TempFile::write(fs, &held, "current.json", b"the document").is_err());
    assert_eq!(std::fs::read(dir.join(&name)).unwrap(), b"planted");
    assert!(!dir.join("current.json").exists());
}

#[test]
fn a_root_that_is_no_directory_is_refused_and_a_fresh_root_holds_no_document() {
    let scratch = tempfile::tempdir().unwrap();
    let target = TargetId::parse(&"cd".repeat(32)).unwrap();
    let durable = DurableDirs::default();
    // A fresh root: no `hook-projections/` yet, so no document in place (and nothing created).
    let root = RuntimeRoot::new(scratch.path());
    let mut steps = FileSteps::new(&root, &target, &RealFs, &durable, Duration::from_secs(1));
    assert!(matches!(steps.read_current(), Ok(None)));
    assert!(!scratch.path().join("hook-projections").exists());
    // A root that is a regular file.
    let file = scratch.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let root = RuntimeRoot::new(&file);
    match root.open() {
        Err(FileError::UnsafeRuntimeDir { reason, .. }) => {
            assert_eq!(reason, "runtime root is not a directory")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_symlink_planted_at_a_target_lock_is_not_followed() {
    use solewriter_files::target_lock::TargetLock;
    use std::time::Instant;
    let scratch = tempfile::tempdir().unwrap();
    let target = TargetId::parse(&"cd".repeat(32)).unwrap();
    let projections = scratch.path().join("hook-projections");
    std::fs::create_dir(&projections).unwrap();
    std::fs::set_permissions(
        &projections,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let outside = scratch.path().join("outside");
    std::os::unix::fs::symlink(&outside, projections.join(format!("{target}.lock"))).unwrap();
    let root = RuntimeRoot::new(scratch.path());
    let timeout = Duration::from_millis(100);
    let err = TargetLock::acquire(&root, &target, Instant::now() + timeout, timeout).unwrap_err();
    assert!(
        matches!(
            err,
            FileError::Io {
                step: "open target lock",
                ..
            }
        ),
        "{err}"
    );
    assert!(!outside.exists(), "nothing created through the link");
}
