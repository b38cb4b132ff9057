//! The data directory's files, read and written defensively: regular files
//! only (a FIFO or a device swapped in cannot hang the node), bounded reads,
//! and new files made whole (temporary file, fsync, rename, directory fsync).

use super::format::MAX_STATE_FILE_LEN;
use crate::error::StartError;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "lock";

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StartError {
    let path = path.to_path_buf();
    move |source| StartError::Io { path, source }
}

pub(super) fn into_io(e: StartError) -> io::Error {
    match e {
        StartError::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

/// What is at `path`, following symbolic links, without opening it (a `stat`
/// never blocks, whatever the file is): `false` if nothing. A non-regular
/// file is refused.
pub(super) fn exists_regular(path: &Path) -> Result<bool, StartError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::metadata(path),
        other => other,
    };
    match meta {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(StartError::NotAFile { path: path.to_path_buf(), kind: kind(m.file_type()) }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StartError::Io { path: path.to_path_buf(), source }),
    }
}

fn kind(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// Opens an existing regular file, non-blocking (a FIFO swapped in after
/// [`exists_regular`] cannot hang the open), and checks what was opened.
pub(super) fn open_regular(path: &Path, write: bool) -> Result<File, StartError> {
    if !exists_regular(path)? {
        let source = io::Error::from(io::ErrorKind::NotFound);
        return Err(StartError::Io { path: path.to_path_buf(), source });
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err(path))?;
    let meta = file.metadata().map_err(io_err(path))?;
    if !meta.is_file() {
        return Err(StartError::NotAFile {
            path: path.to_path_buf(),
            kind: kind(meta.file_type()),
        });
    }
    Ok(file)
}

/// The whole file, or one byte more than [`MAX_STATE_FILE_LEN`] (which no
/// parser accepts) if it is larger.
pub(super) fn read_bounded(file: &File, path: &Path) -> Result<Vec<u8>, StartError> {
    let mut bytes = Vec::new();
    let reader: &File = file;
    reader.take(MAX_STATE_FILE_LEN + 1).read_to_end(&mut bytes).map_err(io_err(path))?;
    Ok(bytes)
}

/// Writes the file `name` in `dir` holding `slot` twice (the state file,
/// the incarnation file): temporary file `tmp`, fsync, rename, directory
/// fsync (the file's creation is metadata, so the full dance is needed).
pub(super) fn create_two_slots(dir: &Path, tmp: &str, name: &str, slot: &[u8]) -> io::Result<()> {
    let tmp = dir.join(tmp);
    {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&tmp)?;
        if !f.metadata()?.is_file() {
            return Err(io::Error::other(format!("{} is not a regular file", tmp.display())));
        }
        f.write_all(slot)?;
        f.write_all(slot)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(name))?;
    File::open(dir)?.sync_all()
}
