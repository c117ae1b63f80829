//! The one transform every tool goes through before it is listed: compact, portable schemas.
//!
//! schemars writes JSON Schema 2020-12 for Rust types: `$schema`, `$defs` + `$ref`, `title`s,
//! Rust integer formats (`uint32`, `uint64`: not JSON Schema, and older clients warn on every
//! one), `minimum: 0` for unsigned types, `["integer", "null"]` type arrays for `Option<T>`
//! (single-`type` dialects such as Gemini's function declarations reject them), `oneOf` of
//! documented string constants for enums, and `default: null`. Every tool's `tools/list` entry
//! is read by the agent in every session, so here each is rewritten once, at start-up:
//!
//! - `$ref`s are inlined (without the Rust type's own doc) and `$defs`, `$schema`, `title`,
//!   `format` and `minimum: 0` dropped;
//! - an optional value is absent, not null: `type` arrays and `anyOf [T, null]` become `T`;
//! - an enum is one `{"type": "string", "enum": [...]}` (its values listed once);
//! - `default`s that say nothing (`null`, `false`, `""`, `[]`, `{}`) or pick an enum's value
//!   (the doc says it where it is not plain) are dropped, and so is `additionalProperties`
//!   (unknown argument names are refused before a tool runs, see `arguments.rs`);
//! - descriptions are folded onto one line, without a closing full stop;
//! - arguments many tools share ([`SHARED_ARGUMENTS`]: `format`) are described once, in the
//!   server's instructions, and not listed per tool (still accepted);
//! - output schemas are dropped: every result still carries `structuredContent`, and its
//!   text says the same; a schema per tool would cost more than the whole input side;
//! - annotations keep only `readOnlyHint: true`, what lets a client run a tool without asking
//!   (absent, the spec's defaults apply: a tool may change things, destructively).
//!
//! `tests/tool_list.rs` measures the result over a real session and holds it under budget.

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;
use std::sync::Arc;

/// Arguments that many tools take alike, described once in the server's instructions instead
/// of in each tool (`format`: `auto`, `elixir` or `erlang`, on every tool that renders terms).
/// A tool still accepts them; they are only not listed.
pub const SHARED_ARGUMENTS: [&str; 1] = ["format"];

/// Rewrites `tool` in place into its compact, portable form; returns the shared arguments it
/// takes but no longer lists.
pub fn compact_tool(tool: &mut Tool) -> Vec<&'static str> {
    let input = Value::Object(tool.input_schema.as_ref().clone());
    let mut shared = Vec::new();
    if let Value::Object(mut schema) = compact(&input) {
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            shared = SHARED_ARGUMENTS
                .into_iter()
                .filter(|name| properties.remove(*name).is_some())
                .collect();
        }
        tool.input_schema = Arc::new(schema);
    }
    tool.output_schema = None;
    tool.title = None;
    if let Some(description) = &tool.description {
        tool.description = Some(one_line(description).into());
    }
    if let Some(annotations) = &mut tool.annotations {
        annotations.title = None;
        annotations.idempotent_hint = None;
        annotations.open_world_hint = None;
        // Only what lets a client skip asking: absent, a tool may change things (the spec's
        // default, which clients treat with care anyway).
        annotations.read_only_hint = annotations.read_only_hint.filter(|&read_only| read_only);
        annotations.destructive_hint = None;
    }
    if tool
        .annotations
        .as_ref()
        .is_some_and(|a| *a == Default::default())
    {
        tool.annotations = None;
    }
    shared
}

/// The compact form of a whole schema (its `$defs` resolved against itself).
pub fn compact(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    rewrite(schema, &defs, 0)
}

/// Bound on `$ref` nesting, so a recursive type cannot loop.
const MAX_DEPTH: usize = 16;

fn rewrite(node: &Value, defs: &JsonObject, depth: usize) -> Value {
    let Value::Object(object) = node else {
        return node.clone();
    };
    let mut object = inline_ref(object, defs, depth);
    for key in ["$schema", "$defs", "definitions", "title", "format"] {
        object.remove(key);
    }
    if object.get("minimum").and_then(Value::as_f64) == Some(0.0) {
        object.remove("minimum");
    }
    if object.get("additionalProperties") == Some(&Value::Bool(false)) {
        object.remove("additionalProperties");
    }
    if object.get("default").is_some_and(says_nothing) {
        object.remove("default");
    }
    if let Some(Value::Array(types)) = object.get("type") {
        let types: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let [single] = types[..] {
            object.insert("type".into(), single.clone());
        }
    }
    if let Some(Value::String(text)) = object.get("description") {
        object.insert("description".into(), Value::String(one_line(text)));
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(properties)) = object.get(key) {
            let properties = properties
                .iter()
                .map(|(name, sub)| (name.clone(), rewrite(sub, defs, depth)))
                .collect();
            object.insert(key.into(), Value::Object(properties));
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub @ Value::Object(_)) = object.get(key) {
            object.insert(key.into(), rewrite(sub, defs, depth));
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        let Some(Value::Array(branches)) = object.remove(key) else {
            continue;
        };
        let branches: Vec<Value> = branches
            .iter()
            .filter(|b| b.get("type") != Some(&Value::String("null".into())))
            .map(|b| rewrite(b, defs, depth))
            .collect();
        if let Some(values) = string_values(&branches) {
            object.insert("type".into(), "string".into());
            object.insert("enum".into(), Value::Array(values));
        } else if let [single] = &branches[..] {
            merge_under(&mut object, single);
        } else {
            object.insert(key.into(), Value::Array(branches));
        }
    }
    if object.contains_key("enum") {
        // `auto`, `transient`…: the doc says so where it is not plain.
        object.remove("default");
    }
    Value::Object(object)
}

/// `object` with its `$ref` (to one of `defs`) replaced by the definition's keys; the
/// referring schema's own keys (its description) win.
fn inline_ref(object: &JsonObject, defs: &JsonObject, depth: usize) -> JsonObject {
    let mut object = object.clone();
    let Some(Value::String(reference)) = object.remove("$ref") else {
        return object;
    };
    let name = reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"));
    match name.and_then(|name| defs.get(name)) {
        Some(definition) if depth < MAX_DEPTH => {
            if let Value::Object(definition) = rewrite(definition, defs, depth + 1) {
                for (key, value) in definition {
                    // A type's own doc is for Rust readers; the field's doc is for the agent.
                    if key != "description" {
                        object.entry(key).or_insert(value);
                    }
                }
            }
        }
        // Unresolvable or too deep: any value (still a schema a client can read).
        _ => {}
    }
    object
}

/// Copies `branch`'s keys into `object`, keeping `object`'s own (its description).
fn merge_under(object: &mut JsonObject, branch: &Value) {
    if let Value::Object(branch) = branch {
        for (key, value) in branch {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// The values of branches that are all string constants or string enums, in order.
fn string_values(branches: &[Value]) -> Option<Vec<Value>> {
    let mut values = Vec::new();
    for branch in branches {
        if branch.get("type") != Some(&Value::String("string".into())) {
            return None;
        }
        match (branch.get("const"), branch.get("enum")) {
            (Some(value), None) => values.push(value.clone()),
            (None, Some(Value::Array(list))) => values.extend(list.iter().cloned()),
            _ => return None,
        }
    }
    (!values.is_empty()).then_some(values)
}

fn says_nothing(value: &Value) -> bool {
    match value {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) | Value::Bool(true) => false,
    }
}

/// Doc comments wrap at 100 columns; a listed description is one line.
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // A closing full stop says nothing (one that ends an abbreviation or `…` stays).
    match line.strip_suffix('.') {
        Some(cut) if !cut.ends_with('.') && !cut.ends_with("e.g") => cut.to_string(),
        _ => line,
    }
}

/// Problems that make a schema unportable or bigger than it needs to be, as `path: problem`
/// (empty when it is clean). Used by the tests over every tool.
#[cfg(test)]
pub fn portability_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(schema, "", &mut problems);
    problems
}

#[cfg(test)]
fn check(node: &Value, path: &str, problems: &mut Vec<String>) {
    match node {
        Value::Object(object) => {
            for (key, value) in object {
                let here = format!("{path}/{key}");
                let problem = match key.as_str() {
                    "$schema" | "$ref" | "$defs" | "definitions" | "format" | "title" => {
                        Some(format!("{here}: `{key}`"))
                    }
                    "type" if !value.is_string() => Some(format!("{here}: type {value}")),
                    "minimum" if value.as_f64() == Some(0.0) => Some(format!("{here}: minimum 0")),
                    _ => None,
                };
                problems.extend(problem);
                // Property names are data, not keywords.
                if key == "properties" {
                    if let Value::Object(properties) = value {
                        for (name, sub) in properties {
                            check(sub, &format!("{here}/{name}"), problems);
                        }
                    }
                } else {
                    check(value, &here, problems);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check(item, &format!("{path}/{i}"), problems);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_enums_and_refs_come_out_flat() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Input",
            "type": "object",
            "$defs": {
                "Lang": {"description": "The language.", "oneOf": [
                    {"type": "string", "enum": ["elixir", "erlang"]},
                    {"type": "string", "const": "auto", "description": "Pick."}]},
                "Level": {"type": "string", "enum": ["error", "info"]}
            },
            "additionalProperties": false,
            "properties": {
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0,
                          "default": null, "description": "How many\n(max 100)."},
                "tail": {"type": "integer", "format": "uint", "minimum": 0, "default": 100},
                "lang": {"$ref": "#/$defs/Lang", "default": "auto", "description": "Syntax."},
                "level": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]},
                "flag": {"type": "boolean", "default": false}
            }
        });
        assert_eq!(
            compact(&schema),
            json!({
                "type": "object",
                "properties": {
                    "limit": {"type": "integer", "description": "How many (max 100)"},
                    "tail": {"type": "integer", "default": 100},
                    "lang": {"type": "string", "enum": ["elixir", "erlang", "auto"],
                             "description": "Syntax"},
                    "level": {"type": "string", "enum": ["error", "info"]},
                    "flag": {"type": "boolean"}
                }
            })
        );
    }

    #[test]
    fn an_enum_default_goes_unsaid() {
        let schema = json!({"properties": {"format": {"$ref": "#/$defs/Lang", "default": "auto"}},
            "$defs": {"Lang": {"type": "string", "enum": ["auto", "elixir"]}}});
        assert_eq!(
            compact(&schema)["properties"]["format"],
            json!({"type": "string", "enum": ["auto", "elixir"]})
        );
    }

    #[test]
    fn mixed_branches_stay_branches_each_with_one_type() {
        let schema = json!({"properties": {"ready": {"oneOf": [
            {"type": "string", "enum": ["app"]},
            {"type": "object", "additionalProperties": false,
             "properties": {"port": {"type": "integer", "format": "uint16", "minimum": 0}},
             "required": ["port"]}]}}});
        let out = compact(&schema);
        assert_eq!(
            out["properties"]["ready"]["oneOf"][1],
            json!({"type": "object", "properties": {"port": {"type": "integer"}},
                   "required": ["port"]})
        );
        assert!(portability_problems(&out).is_empty());
    }

    #[test]
    fn problems_are_named_with_their_path() {
        let problems = portability_problems(&json!({"properties": {
            "format": {"type": ["string", "null"]},
            "n": {"type": "integer", "format": "uint", "minimum": 0}}}));
        assert_eq!(
            problems,
            [
                "/properties/format/type: type [\"string\",\"null\"]",
                "/properties/n/format: `format`",
                "/properties/n/minimum: minimum 0"
            ]
        );
    }
}
