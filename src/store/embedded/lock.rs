//! One store per data directory: fjall locks the directory's `lock` file
//! (`flock`) while a store has it open, and a second open fails. This
//! names the directory and, where the system says, the process holding
//! it, so a second daemon on one data directory says why it cannot start.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::store::StoreError;

/// The file fjall locks in its directory.
const LOCK_FILE: &str = "lock";
/// Most bytes of `/proc/locks` read (a line per lock held on the machine).
const PROC_LOCKS_BYTES_MAX: u64 = 4 << 20;
/// Most characters of the holder's command line shown.
const COMMAND_CHARS_MAX: usize = 200;

/// Why [`super::EmbeddedStore::open`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Another store has the data directory open: a daemon running on it
    /// (or another store of this process).
    Locked {
        /// The data directory.
        path: PathBuf,
        /// Who holds its lock, when the system says (Linux: `/proc/locks`).
        holder: Option<LockHolder>,
    },
    /// The directory could not be created, or the store not opened.
    Store(StoreError),
}

/// The process holding a data directory's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// Its process id.
    pub pid: u32,
    /// Its command line, when readable (at most [`COMMAND_CHARS_MAX`] characters).
    pub command: Option<String>,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Locked { path, holder } => {
                write!(f, "data directory {} is in use by ", path.display())?;
                match holder {
                    Some(LockHolder {
                        pid,
                        command: Some(command),
                    }) => write!(f, "process {pid} ({command})")?,
                    Some(LockHolder { pid, command: None }) => write!(f, "process {pid}")?,
                    None => f.write_str("another process")?,
                }
                f.write_str(
                    ": one daemon per data directory (stop that one, or give this one another data_dir)",
                )
            }
            OpenError::Store(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// The error of opening the store at `path`, fjall having answered `error`.
pub(super) fn open_error(path: &Path, error: fjall::Error) -> OpenError {
    match error {
        fjall::Error::Locked => OpenError::Locked {
            path: path.to_path_buf(),
            holder: holder(&path.join(LOCK_FILE)),
        },
        error => OpenError::Store(StoreError::Io(error.to_string())),
    }
}

/// Elsewhere than Linux, nothing says who holds a lock.
#[cfg(not(target_os = "linux"))]
fn holder(_lock_file: &Path) -> Option<LockHolder> {
    None
}

/// The process `/proc/locks` says holds a lock on `lock_file`; `None` when
/// it cannot say (no such line, unreadable).
#[cfg(target_os = "linux")]
fn holder(lock_file: &Path) -> Option<LockHolder> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(lock_file).ok()?;
    let mut locks = String::new();
    std::fs::File::open("/proc/locks")
        .ok()?
        .take(PROC_LOCKS_BYTES_MAX)
        .read_to_string(&mut locks)
        .ok()?;
    let pid = holder_in(&locks, metadata.dev(), metadata.ino())?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|line| command_line(&line))
        .filter(|line| !line.is_empty());
    Some(LockHolder { pid, command })
}

/// The pid of the lock held on inode `ino` of device `dev` in `locks`
/// (`/proc/locks`: `1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode>
/// <start> <end>`, device numbers in hex; a waiter's line has `->`).
/// The inode alone decides when no line names the device (a file reached
/// through overlayfs is locked on the layer below).
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let (major, minor) = device_numbers(dev);
    let mut inode_only = None;
    for line in locks.lines().filter(|line| !line.contains("->")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(pid), Some(file)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let (Ok(pid), Some((device, inode))) = (pid.parse::<u32>(), file.rsplit_once(':')) else {
            continue;
        };
        if inode.parse::<u64>().ok() != Some(ino) {
            continue;
        }
        if device == format!("{major:02x}:{minor:02x}") {
            return Some(pid);
        }
        inode_only.get_or_insert(pid);
    }
    inode_only
}

/// Linux's major and minor device numbers of `dev` (glibc's `major` and
/// `minor`).
fn device_numbers(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// A `/proc/<pid>/cmdline` (arguments NUL-separated) as one line, cut at
/// [`COMMAND_CHARS_MAX`] characters.
fn command_line(raw: &[u8]) -> String {
    let line = String::from_utf8_lossy(raw)
        .split('\0')
        .filter(|arg| !arg.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if line.chars().count() <= COMMAND_CHARS_MAX {
        return line;
    }
    let cut: String = line.chars().take(COMMAND_CHARS_MAX).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_the_line_of_the_files_device_and_inode() {
        let locks = "1: FLOCK  ADVISORY  WRITE 111 fe:00:42 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 333 fe:01:42 0 EOF\n\
                     3: FLOCK  ADVISORY  WRITE 222 fe:01:42 0 EOF\n\
                     4: POSIX  ADVISORY  WRITE 444 fe:01:43 0 EOF\n";
        let dev = |major: u64, minor: u64| (major << 8) | minor;
        assert_eq!(holder_in(locks, dev(0xfe, 1), 42), Some(222));
        assert_eq!(holder_in(locks, dev(0xfe, 0), 42), Some(111));
        assert_eq!(
            holder_in(locks, dev(8, 1), 42),
            Some(111),
            "another device: the inode decides"
        );
        assert_eq!(holder_in(locks, dev(0xfe, 1), 7), None);
        assert_eq!(holder_in("garbage\n1: FLOCK\n", dev(0xfe, 1), 42), None);
    }

    #[test]
    fn device_numbers_split_as_glibc_does() {
        assert_eq!(device_numbers(0xfe00), (0xfe, 0));
        assert_eq!(device_numbers(0x0801), (8, 1));
        assert_eq!(device_numbers((259 << 8) | 3), (259, 3));
    }

    #[test]
    fn a_command_line_is_one_bounded_line() {
        assert_eq!(
            command_line(b"hotq\0serve\0--data-dir\0/d\0"),
            "hotq serve --data-dir /d"
        );
        let long = command_line(&b"x".repeat(1_000));
        assert_eq!(long.chars().count(), COMMAND_CHARS_MAX + 1);
    }
}
