//! What a message's text may hold before it is stored: a NUL is refused to a sender
//! and dropped from the kernel's own posts (which quote workers' output), so that no
//! post of the kernel fails on PostgreSQL, whose text cannot hold one.

use super::SYSTEM;
use super::decide::prepare_content;
use crate::Scope;
use domain::names::WorkflowRef;

fn scope(me: &str) -> Scope {
    Scope {
        workflow: WorkflowRef {
            name: "global".into(),
            tag: "main".into(),
        },
        workflow_id: 1,
        me: me.into(),
        lead: me == SYSTEM,
        run_id: None,
    }
}

#[test]
fn a_nul_is_refused_to_a_sender_and_dropped_from_the_kernel_s_posts() {
    let e = prepare_content(&scope("alice"), "@bob a\0b")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("NUL character") && e.contains("remove it"),
        "{e}"
    );
    let (content, resource) = prepare_content(&scope(SYSTEM), "@bob run failed: a\0b").unwrap();
    assert_eq!(content, "@bob run failed: a b");
    assert!(resource.is_none());
    let long = format!("@bob {}\0", "x".repeat(5000));
    let (content, resource) = prepare_content(&scope(SYSTEM), &long).unwrap();
    assert!(!content.contains('\0'));
    let (_, full) = resource.expect("a long system post becomes a resource");
    assert!(
        !full.contains('\0') && full.ends_with(' '),
        "{}",
        &full[full.len() - 5..]
    );
}
