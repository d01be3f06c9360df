//! Reading a file someone else named, safely: the one way the server (and its
//! workers) read outside files.
//!
//! `std::fs::read` on what a caller names can hang or exhaust memory: a FIFO
//! blocks the open until a writer comes, `/dev/zero` never ends, and a 300 MiB
//! file is read whole before its size is looked at. Here the file is opened
//! without blocking (O_NONBLOCK; O_NOFOLLOW where links must not be followed),
//! the opened handle is checked to be a regular file, its size is checked before
//! a byte is read, and at most the limit plus one byte is ever read (a file that
//! grows meanwhile is still bounded). Callers on the async runtime run it in
//! `spawn_blocking`.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    NotFound,
    /// Not a regular file: what it is instead.
    NotRegular(&'static str),
    /// Larger than the limit (its size, the limit).
    TooLarge(u64, u64),
    /// A symlink where none may be followed.
    Symlink,
    Io(std::io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound => f.write_str("no such file"),
            ReadError::NotRegular(what) => write!(f, "it is {what}, not a regular file"),
            ReadError::TooLarge(size, max) => {
                write!(f, "it is {size} bytes; at most {max} are read")
            }
            ReadError::Symlink => f.write_str("it is a symlink, which is not followed here"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// What a non-regular file is, in words.
fn kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a folder"
    } else if ft.is_fifo() {
        "a named pipe (FIFO)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Reads at most `max` bytes of the regular file at `path`. With `follow` false a
/// symlink at the final component is refused.
pub fn read(path: &Path, max: u64, follow: bool) -> Result<Vec<u8>, ReadError> {
    let mut flags = nix::libc::O_NONBLOCK;
    if !follow {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::NotFound,
            // O_NOFOLLOW on a symlink fails with ELOOP.
            _ if e.raw_os_error() == Some(nix::libc::ELOOP) => ReadError::Symlink,
            _ => ReadError::Io(e),
        })?;
    let meta = f.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind(&meta.file_type())));
    }
    if meta.len() > max {
        return Err(ReadError::TooLarge(meta.len(), max));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    if buf.len() as u64 > max {
        return Err(ReadError::TooLarge(buf.len() as u64, max));
    }
    Ok(buf)
}

/// Like [`read`], as UTF-8 text.
pub fn read_text(path: &Path, max: u64, follow: bool) -> Result<String, String> {
    let bytes = read(path, max, follow).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_devices_and_big_files_are_refused_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let t = std::time::Instant::now();
        assert!(
            matches!(read(&fifo, 10, true), Err(ReadError::NotRegular(w)) if w.contains("FIFO"))
        );
        assert!(matches!(
            read(Path::new("/dev/zero"), 10, true),
            Err(ReadError::NotRegular(_))
        ));
        assert!(matches!(
            read(dir.path(), 10, true),
            Err(ReadError::NotRegular("a folder"))
        ));
        assert!(t.elapsed().as_secs() < 2);
        let big = dir.path().join("big.yaml");
        std::fs::write(&big, vec![b'a'; 100]).unwrap();
        assert!(matches!(
            read(&big, 99, true),
            Err(ReadError::TooLarge(100, 99))
        ));
        assert_eq!(read(&big, 100, true).unwrap().len(), 100);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&big, &link).unwrap();
        assert!(matches!(read(&link, 100, false), Err(ReadError::Symlink)));
        assert_eq!(read(&link, 100, true).unwrap().len(), 100);
        assert!(matches!(
            read(&dir.path().join("none"), 1, true),
            Err(ReadError::NotFound)
        ));
    }
}
