//! What this machine offers a sandbox: its Landlock ABI, and whether a process
//! may make a user namespace of its own. Asked by the kernel (its readiness
//! report, the refusal of a required sandbox) and by the worker that applies one.

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

#[cfg(test)]
mod tests {
    #[test]
    fn the_abi_is_a_small_number() {
        // 0 on a machine without Landlock; no kernel has reached 100.
        assert!(super::landlock_abi() < 100);
    }
}
