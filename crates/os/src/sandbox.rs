//! What this machine offers a sandbox: its Landlock ABI, and whether a process
//! may make a user namespace of its own. Asked by the kernel (its readiness
//! report, the refusal of a required sandbox) and by the worker that applies one;
//! and the mounts and capability drop the worker makes on itself.

use std::path::Path;

/// The machine's Landlock ABI version: 0 when Landlock is not built in or not
/// enabled (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
pub fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query reads no memory (a null attribute of size 0).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// Whether an unprivileged user namespace can be made here (the kernel allows
/// them and the limit is not zero).
pub fn user_namespaces() -> bool {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_owned());
    let allowed = read("/proc/sys/kernel/unprivileged_userns_clone").map_or(true, |v| v != "0");
    let max = read("/proc/sys/user/max_user_namespaces").map_or(true, |v| v != "0");
    allowed && max
}

/// Whether a process here can make the namespaces a run's worker makes: a user
/// namespace of its own (not needed by root) and a mount namespace in it. Tried
/// in a forked child, as the sysctls do not say it all (Ubuntu's AppArmor
/// `kernel.apparmor_restrict_unprivileged_userns`, a container's seccomp).
pub fn mount_namespaces() -> bool {
    // SAFETY: the child makes system calls only, then leaves with _exit.
    match unsafe { libc::fork() } {
        -1 => false,
        0 => unsafe {
            let user = libc::unshare(libc::CLONE_NEWUSER) == 0;
            let ok = (user || libc::geteuid() == 0) && libc::unshare(libc::CLONE_NEWNS) == 0;
            libc::_exit(if ok { 0 } else { 1 })
        },
        child => {
            let mut status = 0;
            // SAFETY: waits for the child just forked.
            let r = unsafe { libc::waitpid(child, &mut status, 0) };
            r == child && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    }
}

/// A mount namespace of this process's own, every mount in it private: what it
/// mounts next no other process sees, and no mount made outside reaches it.
/// Needs CAP_SYS_ADMIN (root, or a user namespace of its own).
pub fn own_mount_namespace() -> std::io::Result<()> {
    // SAFETY: unshare takes flags only.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
}

/// Binds `path` over itself read-only (what it holds, too), keeping the flags
/// its mount has (nosuid, nodev, noexec: a user namespace may not clear them).
pub fn bind_read_only(path: &Path) -> std::io::Result<()> {
    mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)?;
    let st = nix::sys::statvfs::statvfs(path)?;
    use nix::sys::statvfs::FsFlags as F;
    let kept = [
        (F::ST_NOSUID, libc::MS_NOSUID),
        (F::ST_NODEV, libc::MS_NODEV),
        (F::ST_NOEXEC, libc::MS_NOEXEC),
        (F::ST_NOATIME, libc::MS_NOATIME),
        (F::ST_NODIRATIME, libc::MS_NODIRATIME),
        (F::ST_RELATIME, libc::MS_RELATIME),
    ]
    .iter()
    .filter(|(f, _)| st.flags().contains(*f))
    .fold(0, |acc, (_, m)| acc | m);
    let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | kept;
    mount(None, path, None, flags, None)
}

/// Binds the folder `path` over itself: a mount point, which cannot be renamed
/// or removed (EBUSY), while what it holds stays as writable as it was (the
/// mounts below it too, whatever order they were made in).
pub fn pin(path: &Path) -> std::io::Result<()> {
    mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)
}

/// Root's uid 0 gains no capability at an exec (SECBIT_NOROOT), and nothing
/// it runs may change that (SECBIT_NOROOT_LOCKED). Needs CAP_SETPCAP: call it
/// before [`drop_capabilities`].
pub fn no_root_powers() -> std::io::Result<()> {
    const NOROOT: libc::c_ulong = 1 << 0;
    const NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    // SAFETY: prctl with integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, NOROOT | NOROOT_LOCKED, 0, 0, 0) })
}

/// A tmpfs of its own at `path`, at most `mb` MiB, writable by everyone (as
/// `/dev/shm` is), no devices and no set-user-id programs.
pub fn private_tmpfs(path: &Path, mb: u64) -> std::io::Result<()> {
    let data = format!("size={mb}m,mode=1777");
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    mount(
        Some(Path::new("tmpfs")),
        path,
        Some("tmpfs"),
        flags,
        Some(&data),
    )
}

/// Drops every capability of this process, and from its bounding and ambient
/// sets, so that no program it runs regains one (a root without a user namespace
/// of its own otherwise keeps the machine's).
pub fn drop_capabilities() -> std::io::Result<()> {
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    drop_capabilities_up_to(last)
}

/// [`drop_capabilities`], given the machine's highest capability: system calls
/// alone, as between a fork and an exec.
fn drop_capabilities_up_to(last: libc::c_ulong) -> std::io::Result<()> {
    for cap in 0..=last {
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        // EINVAL: a capability this kernel does not know.
        if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: as above.
    let ambient = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    check(ambient)?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version 3 header and two data structs.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    check(r as libc::c_int)
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |b: &[u8]| {
        CString::new(b).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let src = src.map(|p| c(p.as_os_str().as_bytes())).transpose()?;
    let target = c(target.as_os_str().as_bytes())?;
    let fstype = fstype.map(|f| c(f.as_bytes())).transpose()?;
    let data = data.map(|d| c(d.as_bytes())).transpose()?;
    let ptr = |o: &Option<CString>| o.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string alive for the call.
    check(unsafe {
        libc::mount(
            ptr(&src),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    })
}

#[cfg(test)]
mod tests {
    /// The probe agrees with the machine: this one, like CI's, allows user
    /// namespaces (the sandbox tests make them), so the probe must say so.
    #[test]
    fn the_namespace_probe_sees_what_a_child_can_make() {
        assert!(
            super::mount_namespaces(),
            "this machine allows user namespaces"
        );
    }

    #[test]
    fn the_abi_is_a_small_number() {
        // 0 on a machine without Landlock; no kernel has reached 100.
        assert!(super::landlock_abi() < 100);
    }

    /// A process that drops its capabilities runs programs with none, in every
    /// set: root in the machine's namespace (when the tests run as root), and
    /// root of a user namespace of its own, always (it holds every capability
    /// there: the test fails on a machine that forbids user namespaces).
    #[test]
    fn a_root_without_capabilities_runs_programs_with_none() {
        use std::os::unix::process::CommandExt;
        let root = nix::unistd::geteuid().is_root();
        for own_namespace in [false, true].into_iter().filter(|o| *o || root) {
            let mut cmd = std::process::Command::new("grep");
            cmd.args(["^Cap", "/proc/self/status"]);
            // SAFETY: only system calls between the fork and the exec.
            unsafe {
                cmd.pre_exec(move || {
                    if own_namespace {
                        super::check(libc::unshare(libc::CLONE_NEWUSER))?;
                    }
                    super::no_root_powers()?;
                    super::drop_capabilities_up_to(63)
                })
            };
            let out = cmd.output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{own_namespace}: {out:?}");
            for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
                let line = text
                    .lines()
                    .find(|l| l.starts_with(set))
                    .unwrap_or_default();
                let none = line.ends_with("\t0000000000000000");
                assert!(none, "{set} (own namespace {own_namespace}): {text}");
            }
        }
    }
}
