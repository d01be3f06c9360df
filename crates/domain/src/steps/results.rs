//! Result events (`{step: review, result: {verdict: approved}}`): read, put in
//! words, and checked against the schema of the step whose result they test.

use super::{GraphError, On, StepDef};
use serde_json::Value;

/// "verdict = \"approved\" and score = 3".
pub(super) fn tests_words(fields: &[(String, Value)]) -> String {
    let tests: Vec<String> = fields.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    tests.join(" and ")
}

/// `{step: <id>, result: {<field>: <value>, ...}}`: a step's result tested.
pub(super) fn result_event(o: &serde_json::Map<String, Value>) -> Result<On, String> {
    if let Some(k) = o.keys().find(|k| !["step", "result"].contains(&k.as_str())) {
        return Err(format!("unknown key {k:?} beside step and result"));
    }
    let step = match o.get("step") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err("step: the step whose result is tested, by id or agent".into()),
    };
    let fields: Vec<(String, Value)> = match o.get("result") {
        Some(Value::Object(f)) if !f.is_empty() => {
            f.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        _ => {
            return Err(
                "result: the fields tested and their values, e.g. {verdict: approved}".into(),
            );
        }
    };
    Ok(On::Result { step, fields })
}

/// Every result event tests a field its step's schema has, with a value the
/// field's schema takes.
pub(super) fn check_results(steps: &[StepDef]) -> Result<(), GraphError> {
    for (i, s) in steps.iter().enumerate() {
        for (k, e) in s.on.iter().enumerate() {
            let On::Result { step, fields } = e else {
                continue;
            };
            let err = |message: String, fix: String| GraphError {
                step: i,
                on: Some(k),
                message,
                fix,
            };
            let tested = steps.iter().find(|t| t.id == *step).expect("resolved");
            let Some(schema) = &tested.result else {
                return Err(err(
                    format!("step {step} asks for no result, so its result cannot be tested"),
                    format!("give step {step} a `result:` schema, or wait for {step}.complete"),
                ));
            };
            for (name, value) in fields {
                let names: Vec<&str> = schema
                    .root()
                    .properties
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect();
                let Some(field) = schema.property(name) else {
                    return Err(err(
                        format!("step {step}'s result schema has no field {name:?}"),
                        format!("test one of its fields: {}", names.join(", ")),
                    ));
                };
                if !field.admits(value) {
                    return Err(err(
                        format!("step {step}'s result field {name} is never {value}"),
                        format!("test a value it may have: {}", field.words()),
                    ));
                }
            }
        }
    }
    Ok(())
}
