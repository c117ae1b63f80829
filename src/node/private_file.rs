//! Files only this user can read: the check that a state directory is private (its records
//! decide which processes a new server kills) and the atomic 0600 writes of the state file,
//! the node records and the logs on disk. Below `persist` and `state_file`, which both use it.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The state directory decides which processes a new server kills: it must be a real
/// directory owned by this user that nobody else can write to or read.
pub fn check_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: getuid never fails.
    let uid = unsafe { libc::getuid() };
    let problem = if !meta.is_dir() {
        Some("is not a directory (a symlink?)".to_string())
    } else if meta.uid() != uid {
        Some(format!(
            "is owned by uid {}, not by you (uid {uid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "has mode {:04o}; it must be 0700",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{problem}: other users could plant records that make this server kill \
                 processes. Fix it with `chmod 700 {0}` (and make it yours), or pass \
                 --state-dir with a private directory",
                dir.display()
            ),
        )),
    }
}

/// A new file only its owner can read, never one that exists, never through a symlink.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
}

/// Writes `bytes` to a new temp file beside `path` ([`create_private`]), synced, then renames
/// it over `path`: a crash at any instant leaves the old file or the new one.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("{:016x}.tmp", rand::random::<u64>()));
    let mut file = create_private(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
