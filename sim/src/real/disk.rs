//! A broker's data directory on its own small ext4 filesystem, in a sparse
//! image file mounted through a loop device, and the disk-full fault:
//! a filler file written until the device has no free block. Dropping a
//! [`LoopFs`] unmounts it (detaching the loop device) and removes the
//! image, even when the run failed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::net::run;

/// Largest filler write; the last one is cut short by ENOSPC.
const FILL_CHUNK_BYTES: usize = 1 << 20;

/// A mounted filesystem of its own.
#[derive(Debug)]
pub struct LoopFs {
    image: PathBuf,
    mount: PathBuf,
    mounted: bool,
}

impl LoopFs {
    /// A `size_mb` ext4 filesystem (no blocks reserved for root: the broker
    /// runs as root here and must see the device fill) in `image`, mounted
    /// at `mount`.
    pub fn new(image: &Path, mount: &Path, size_mb: u64) -> Result<Self, String> {
        let file = std::fs::File::create(image).map_err(|e| format!("create image: {e}"))?;
        file.set_len(size_mb << 20)
            .map_err(|e| format!("size image: {e}"))?;
        drop(file);
        std::fs::create_dir_all(mount).map_err(|e| format!("mount point: {e}"))?;
        let mut fs = Self {
            image: image.to_owned(),
            mount: mount.to_owned(),
            mounted: false,
        };
        let image_s = image.to_string_lossy();
        run("mkfs.ext4", &["-q", "-F", "-m", "0", &image_s])?;
        run("mount", &["-o", "loop", &image_s, &mount.to_string_lossy()])?;
        fs.mounted = true;
        Ok(fs)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mount
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("chaos-filler")
    }

    /// Writes the filler until the device is full; the bytes written.
    pub fn fill(&self) -> Result<u64, String> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .map_err(|e| format!("open filler: {e}"))?;
        let chunk = vec![0u8; FILL_CHUNK_BYTES];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => return Err(format!("fill: {e}")),
            }
        }
        // Written blocks are allocated at write time; the sync makes the
        // full device visible to the broker's next allocation for sure.
        let _ = file.sync_all();
        Ok(written)
    }

    /// Removes the filler: space returns.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            // A lazy unmount cannot fail on a busy mount; `-d` frees the
            // loop device once it is really gone.
            let mount = self.mount.to_string_lossy().into_owned();
            if run("umount", &["-d", &mount]).is_err() {
                let _ = run("umount", &["-l", "-d", &mount]);
            }
        }
        let _ = std::fs::remove_file(&self.image);
    }
}
