use super::*;
use serde_json::json;

/// Parses `schema`, checks `input` and compares what came out: "ok" or the
/// misfits one per line.
fn check(schema: Value, input: Value, expect: &str) {
    let s = ResultSchema::parse(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let got = match s.check(&input) {
        Ok(()) => "ok".to_string(),
        Err(m) => m
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    };
    assert_eq!(got, expect, "schema {schema}, input {input}");
}

/// Parses `schema` and compares the refusal with `expect` ("ok" if accepted).
fn parse(schema: Value, expect: &str) {
    let got = match ResultSchema::parse(&schema) {
        Ok(_) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    assert_eq!(got, expect, "schema {schema}");
}

fn review() -> Value {
    json!({
        "type": "object",
        "description": "a review",
        "properties": {
            "verdict": {"type": "string", "enum": ["approved", "changes_requested"]},
            "findings": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "severity": {"enum": ["low", "high"]},
                    "line": {"type": "integer"}
                },
                "required": ["severity"]
            }}
        },
        "required": ["verdict"]
    })
}

#[test]
fn results_are_checked_and_misfits_named() {
    let cases: &[(Value, Value, &str)] = &[
        (review(), json!({"verdict": "approved"}), "ok"),
        (
            review(),
            json!({"verdict": "approved", "extra": 1, "findings": []}),
            "ok",
        ),
        (
            review(),
            json!({}),
            "result.verdict: missing; it is required (string, one of approved, changes_requested)",
        ),
        (
            review(),
            json!({"verdict": "maybe"}),
            "result.verdict: expected one of approved, changes_requested; got \"maybe\"",
        ),
        (
            review(),
            json!({"verdict": "approved", "findings": [
                {"severity": "low"}, {"severity": "high", "line": 3}, {"severity": "medium"}
            ]}),
            "result.findings[2].severity: expected one of low, high; got \"medium\"",
        ),
        (
            review(),
            json!({"verdict": "approved", "findings": [{"line": 2.5}]}),
            "result.findings[0].severity: missing; it is required (one of low, high)\n\
             result.findings[0].line: expected integer; got number 2.5",
        ),
        (
            review(),
            json!("looks good"),
            "result: expected object; got string \"looks good\"",
        ),
        (
            review(),
            json!({"verdict": "approved", "findings": {"severity": "low"}}),
            "result.findings: expected array; got an object",
        ),
        (json!({"type": "integer"}), json!(3.0), "ok"),
        (json!({"type": "number"}), json!(3.5), "ok"),
        (
            json!({"type": "null"}),
            json!(false),
            "result: expected null; got boolean false",
        ),
        (
            json!({"type": "boolean"}),
            json!(null),
            "result: expected boolean; got null",
        ),
        (json!({}), json!({"anything": [1]}), "ok"),
        (json!({"enum": [1, "two", null]}), json!(null), "ok"),
        (
            json!({"type": "array", "items": {"type": "string"}}),
            json!([1, 2, 3, 4, 5, 6, 7]),
            "result[0]: expected string; got number 1\nresult[1]: expected string; got number 2\n\
             result[2]: expected string; got number 3\nresult[3]: expected string; got number 4\n\
             result[4]: expected string; got number 5",
        ),
        (json!({"type": "string"}), json!("x".repeat(100)), "ok"),
        (
            json!({"type": "integer"}),
            json!("x".repeat(100)),
            &format!(
                "result: expected integer; got string \"{}...",
                "x".repeat(56)
            ),
        ),
    ];
    for (schema, input, expect) in cases {
        check(schema.clone(), input.clone(), expect);
    }
}

#[test]
fn schemas_outside_the_subset_are_refused_naming_keyword_and_place() {
    let cases: &[(Value, &str)] = &[
        (review(), "ok"),
        (json!({"type": "string", "description": "why"}), "ok"),
        (
            json!({"type": "object", "additionalProperties": false}),
            "`additionalProperties` is not supported; a result schema may use only type, \
             properties, required, enum, items, description",
        ),
        (
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}),
            "at properties.n: `minimum` is not supported; a result schema may use only type, \
             properties, required, enum, items, description",
        ),
        (
            json!({"type": "array", "items": {"type": "object", "properties": {"a": {"$ref": "#"}}}}),
            "at items.properties.a: `$ref` is not supported; a result schema may use only type, \
             properties, required, enum, items, description",
        ),
        (
            json!({"type": "text"}),
            "at type: must be one of object, array, string, number, integer, boolean, null, not string \"text\"",
        ),
        (
            json!({"type": ["string", "null"]}),
            "at type: must be one of object, array, string, number, integer, boolean, null, not an array of 2",
        ),
        (
            json!({"properties": {"a": {}}}),
            "`properties` and `required` need \"type\": \"object\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "at required: names \"b\", which is not in `properties`",
        ),
        (
            json!({"type": "object", "required": "a"}),
            "at required: must be an array of names, not string \"a\"",
        ),
        (json!({"items": {}}), "`items` needs \"type\": \"array\""),
        (
            json!({"enum": []}),
            "at enum: must list 1 to 100 values, not 0",
        ),
        (
            json!({"type": "string", "enum": ["a", 1]}),
            "at enum: lists number 1, which is not of the schema's type string",
        ),
        (
            json!("string"),
            "a schema must be an object such as {\"type\": \"string\"}, not string \"string\"",
        ),
        (
            json!({"description": 3}),
            "at description: must be a string",
        ),
    ];
    for (schema, expect) in cases {
        parse(schema.clone(), expect);
    }
}

#[test]
fn size_and_depth_are_bounded() {
    let mut deep = json!({"type": "string"});
    for _ in 0..MAX_DEPTH {
        deep = json!({"type": "array", "items": deep});
    }
    let e = ResultSchema::parse(&deep).unwrap_err();
    assert!(e.message.contains("deeper than 8"), "{e}");
    assert_eq!(e.path, format!("items{}", ".items".repeat(MAX_DEPTH - 1)));
    let many: Map<String, Value> = (0..MAX_NODES)
        .map(|i| (format!("p{i}"), json!({})))
        .collect();
    let e = ResultSchema::parse(&json!({"type": "object", "properties": many})).unwrap_err();
    assert!(e.message.contains("over 200 schemas"), "{e}");
    let big = json!({"type": "string", "description": "x".repeat(MAX_SCHEMA_BYTES)});
    let e = ResultSchema::parse(&big).unwrap_err();
    assert!(e.message.contains("at most 16384"), "{e}");
}

#[test]
fn a_property_is_found_and_tells_which_values_fit() {
    let s = ResultSchema::parse(&review()).unwrap();
    let verdict = s.property("verdict").unwrap();
    assert!(verdict.admits(&json!("approved")));
    assert!(!verdict.admits(&json!("maybe")));
    assert_eq!(
        verdict.words(),
        "string, one of approved, changes_requested"
    );
    assert!(s.property("nope").is_none());
    assert_eq!(s.as_json(), &review());
}

#[test]
fn check_result_takes_a_schema_as_json() {
    assert_eq!(
        check_result(&review(), &json!({"verdict": "approved"})),
        Ok(())
    );
    assert_eq!(
        check_result(&review(), &json!({"verdict": 1})),
        Err(
            "the result does not fit its schema: result.verdict: expected string; got number 1. \
             Fix it and submit again"
                .into()
        )
    );
    assert_eq!(
        check_result(&json!({"type": "tuple"}), &json!(1)).unwrap_err(),
        "result schema: at type: must be one of object, array, string, number, integer, boolean, null, \
         not string \"tuple\""
    );
}
