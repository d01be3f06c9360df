//! Tool arguments, read so that a mistake names the argument at fault.
//!
//! rmcp's own `Parameters` reports a type error without saying which argument
//! (`invalid type: integer 3600, expected a string`); this one reads the arguments
//! with the path of the failing field (`ttl: invalid type: integer 3600, expected a
//! string`) and says how to go on. It keeps rmcp's message prefix, which is what
//! makes rmcp answer with a tool error (`isError: true`, seen by the model) rather
//! than a protocol error. Its name must stay `Parameters`: rmcp's `#[tool]` macro
//! finds the argument schema by that name.
//!
//! Unknown argument names are refused before this runs, in one place for every
//! tool ([`crate::AgentWorker::call_tool`]), against the tool's schema.

use rmcp::handler::server::{common::FromContextPart, tool::ToolCallContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// rmcp turns an invalid-params error with this prefix into a tool error.
const PREFIX: &str = "failed to deserialize parameters:";

pub struct Parameters<T>(pub T);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let tool = context.name().to_owned();
        let args = context.arguments.take().unwrap_or_default();
        serde_path_to_error::deserialize(serde_json::Value::Object(args))
            .map(Parameters)
            .map_err(|e| {
                let path = e.path().to_string();
                let what = e.inner().to_string();
                let at = if path == "." {
                    String::new()
                } else {
                    format!("{path}: ")
                };
                rmcp::ErrorData::invalid_params(
                    format!("{PREFIX} {at}{what}. Fix that argument and call {tool} again."),
                    None,
                )
            })
    }
}

/// The one argument of the tools that act on one agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = super::no_null_defaults)]
pub struct TargetArgs {
    /// "alice" or "alice@review:pr-1".
    pub target: String,
}
