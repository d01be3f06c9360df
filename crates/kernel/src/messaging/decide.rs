//! What a send decides before it reads or writes anything but the instance's
//! agents: the text as posted (a long one of the lead's as a resource), the
//! addressee of a direct message, who the mentions reach and which are of no
//! member, and what the sender is told. Pure: the one place of these rules for
//! both ways a send is written (`post` in the module above, and `one`, a send in
//! one statement).

use super::resources::resource_id;
use super::{
    MAX_LEAD_MESSAGE_BYTES, MAX_MESSAGE_CHARS, MissedMessage, Outgoing, SendResult, mentions,
    preview,
};
use crate::Scope;
use domain::error::{Error, Result};
use domain::names::{LEAD, SYSTEM};

/// What a send decides from its text and the instance's agents alone, before it
/// reads or writes anything else: the one place of these rules for both ways a
/// send is written (`post`, and `one` in one statement).
pub(super) struct Decided {
    /// The text to post (a pointer for a long one) and the resource holding it.
    pub(super) content: String,
    pub(super) resource: Option<(String, String)>,
    /// The agents and the lead.
    pub(super) members: Vec<String>,
    /// The addressee of a direct message.
    pub(super) to: Option<String>,
    pub(super) parsed: mentions::Mentions,
    pub(super) recipients: Vec<String>,
    pub(super) unknown: Vec<String>,
}

/// [`Decided`] for `send` by `scope`'s member among `agents`; refused when the text
/// or the addressee is.
pub(super) fn decide(scope: &Scope, send: &Outgoing, agents: &[String]) -> Result<Decided> {
    let (content, resource) = prepare_content(scope, &send.message)?;
    let mut members = agents.to_vec();
    members.push(LEAD.to_owned());
    let to = addressee(scope, send, &members)?;
    let parsed = mentions::parse(&send.message);
    let (mut recipients, unknown) = mentions::recipients(&parsed, &members, agents, &scope.me);
    if let Some(t) = &to {
        // A DM reaches only its addressee, whatever it mentions.
        recipients = vec![t.clone()];
    }
    Ok(Decided {
        content,
        resource,
        members,
        to,
        parsed,
        recipients,
        unknown,
    })
}

/// Whether `text` sent in `scope` is stored as a resource and sent as a pointer
/// to it: the lead's text past [`MAX_MESSAGE_CHARS`] (an agent's is refused).
pub(super) fn becomes_resource(scope: &Scope, text: &str) -> bool {
    scope.lead && text.chars().count() > MAX_MESSAGE_CHARS
}

/// Checks the text and, for the lead, turns an over-long message into a resource
/// pointer. Returns (content to post, resource id).
pub(super) fn prepare_content(
    scope: &Scope,
    text: &str,
) -> Result<(String, Option<(String, String)>)> {
    if text.trim().is_empty() {
        return Err(Error::invalid(
            "message is empty: write something, or do not send",
        ));
    }
    // PostgreSQL's text cannot hold a NUL, and SQLite's functions stop at it. A
    // sender is told; the kernel's own posts (which quote a worker's output) lose it.
    let cleaned;
    let text = match (text.contains('\0'), scope.me == SYSTEM) {
        (false, _) => text,
        (true, true) => {
            cleaned = text.replace('\0', " ");
            &cleaned
        }
        (true, false) => {
            return Err(Error::invalid(
                "message contains a NUL character (\\0), which text cannot hold: remove it",
            ));
        }
    };
    let chars = text.chars().count();
    if chars <= MAX_MESSAGE_CHARS {
        return Ok((text.to_owned(), None));
    }
    if !becomes_resource(scope, text) {
        return Err(Error::invalid(format!(
            "message too long ({chars} characters, the limit is {MAX_MESSAGE_CHARS}): store the full text with \
             resource_create and send a short message with its id"
        )));
    }
    if text.len() > MAX_LEAD_MESSAGE_BYTES {
        return Err(Error::invalid(format!(
            "message too long ({} bytes; even the lead's limit is {MAX_LEAD_MESSAGE_BYTES}): split it or put it in a document",
            text.len()
        )));
    }
    let id = resource_id(text);
    // Keep the addressing so the same people are reached, then point to the resource.
    let (leading, rest) = mentions::leading_run(text);
    let lead: String = leading.iter().map(|n| format!("@{n} ")).collect();
    let pointer = format!(
        "{lead}[long message ({chars} characters) stored as resource {id}]\n{}\n\nRead the full text with resource_read(\"{id}\").",
        preview(rest)
    );
    Ok((pointer, Some((id, text.to_owned()))))
}

/// The member a direct message (`to`) is for, by any case; refused when it is no
/// member or the sender.
fn addressee(scope: &Scope, send: &Outgoing, members: &[String]) -> Result<Option<String>> {
    Ok(
        match send.to.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => {
                let t = t.trim_start_matches('@');
                let Some(name) = members.iter().find(|m| m.eq_ignore_ascii_case(t)) else {
                    return Err(Error::not_found(format!(
                        "cannot send a direct message to {t:?}: not a member of {}; members: {}",
                        scope.workflow,
                        members.join(", ")
                    )));
                };
                if name.eq_ignore_ascii_case(&scope.me) {
                    return Err(Error::invalid("cannot send a direct message to yourself"));
                }
                Some(name.clone())
            }
        },
    )
}

/// What the sender of a send decided as `d` and written as `id` is told: whom it
/// reached, the mentions of no member, what its guard found `missed` (listed and
/// counted), where a long text went, and the notes in words (`governed_note` a
/// contract's).
pub(super) fn send_result(
    scope: &Scope,
    d: Decided,
    id: String,
    (missed, missed_count): (Vec<MissedMessage>, i64),
    governed_note: Option<&str>,
) -> SendResult {
    let nobody = d.recipients.is_empty() && d.to.is_none() && governed_note.is_none();
    let notes = send_notes(
        scope,
        missed_count,
        &d.unknown,
        &d.members,
        governed_note,
        nobody,
    );
    SendResult {
        id,
        recipients: d.recipients,
        missed,
        missed_count,
        unknown_mentions: d.unknown,
        resource: d.resource.map(|(rid, _)| rid),
        note: (!notes.is_empty()).then(|| notes.join(" ")),
    }
}

/// What the sender is told besides the message's id: messages it missed, mentions
/// of no member, what a contract did, that nobody was addressed.
fn send_notes(
    scope: &Scope,
    missed_count: i64,
    unknown: &[String],
    members: &[String],
    governed_note: Option<&str>,
    nobody: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    if missed_count > 0 {
        notes.push(format!(
            "{missed_count} message(s) were posted since you last read the channel; your message was sent anyway. \
             Read them with channel_read before you continue (force: true skips this check)."
        ));
    }
    if !unknown.is_empty() {
        notes.push(format!(
            "not members of {}: {} (nobody got those mentions); members: {}",
            scope.workflow,
            unknown
                .iter()
                .map(|u| format!("@{u}"))
                .collect::<Vec<_>>()
                .join(", "),
            members.join(", ")
        ));
    }
    if let Some(n) = governed_note {
        notes.push(n.to_owned());
    }
    if nobody {
        notes.push(
            "nobody was mentioned, so no inbox got this; start with @name to address someone"
                .into(),
        );
    }
    notes
}
