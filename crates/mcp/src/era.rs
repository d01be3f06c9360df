//! Which era of the protocol a request speaks: what a server may do for it (ask
//! the client back, or answer `input_required`; tasks by request or by rule)
//! follows from this one predicate.

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

/// Whether this request speaks 2026-07-28 or later: no server-to-client requests
/// (`input_required` instead of elicitation), and the tasks extension as the rule.
pub fn modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}
