//! `os_sup_mcp tools [NAME]`: the server's tools one line each, or one tool's every argument
//! (the shared ones the listing leaves out included) with its type, its allowed values or
//! forms and its default, then one example call, so nothing is learned from a refusal.

use anyhow::anyhow;
use serde_json::{json, Map, Value};

/// One line per tool: its name and the first line of its description.
pub fn list(tools: &[Value]) -> String {
    let lines: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{:<18} {}",
                t["name"].as_str().unwrap_or("?"),
                first_line(t)
            )
        })
        .collect();
    lines.join("\n")
}

/// Tool `name`: its description, one line per argument (required ones first), one example
/// call, and the command-line verb that makes the same call when there is one.
pub fn one(tools: &[Value], name: &str) -> anyhow::Result<String> {
    let found = tools
        .iter()
        .find(|t| t["name"] == json!(name))
        .ok_or_else(|| {
            let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            anyhow!("no tool `{name}`; tools: {}", names.join(", "))
        })?;
    let schema = &found["inputSchema"];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut properties: Vec<(String, Value)> = schema["properties"]
        .as_object()
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let unlisted = crate::mcp::McpServer::unlisted_arguments(name);
    for (arg, spec) in &unlisted {
        if !properties.iter().any(|(k, _)| k == arg) {
            let mut spec = spec.clone();
            spec["description"] = json!(SHARED_ABOUT);
            properties.push((arg.to_string(), spec));
        }
    }
    properties.sort_by_key(|(arg, _)| !required.contains(&arg.as_str()));
    let mut out = format!("{name}: {}\n", found["description"].as_str().unwrap_or(""));
    for (arg, spec) in &properties {
        let mut kind = kind(spec);
        if required.contains(&arg.as_str()) {
            kind += ", required";
        }
        if let Some(default) = spec.get("default") {
            kind += &format!(", default {default}");
        }
        out += &format!("  {arg}: {kind}");
        if let Some(about) = spec["description"].as_str() {
            out += &format!(" — {}", about.replace('\n', " "));
        }
        out.push('\n');
    }
    out += &format!(
        "example: os_sup_mcp call {name} '{}'",
        example(&properties, &required, &unlisted)
    );
    if let Some(verb) = super::command::verb_of(name) {
        out += &format!("\n    or: os_sup_mcp {verb} … (see `os_sup_mcp {verb} --help`)");
    }
    Ok(out)
}

/// What a shared argument (`format`, unlisted per tool) does; the server's instructions say it
/// once for every tool.
const SHARED_ABOUT: &str = "how terms are written; default auto (Elixir on Elixir nodes)";

fn first_line(tool: &Value) -> &str {
    tool["description"]
        .as_str()
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("")
}

/// An argument's type as a reader writes it: `string`, `integer`, `array of string`,
/// `one of: a, b`, `"app" | {"log": string} | {"port": integer}`.
fn kind(spec: &Value) -> String {
    if let Some(values) = spec["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
            .collect();
        return format!("one of: {}", values.join(", "));
    }
    if let Some(forms) = spec["anyOf"].as_array().or(spec["oneOf"].as_array()) {
        let forms: Vec<String> = forms.iter().flat_map(forms_of).collect();
        return forms.join(" | ");
    }
    let of = spec["type"].as_str().unwrap_or("object");
    match of {
        "array" => format!("array of {}", kind(&spec["items"])),
        "object" => match spec["properties"].as_object() {
            Some(properties) => object_form(properties),
            None if spec["additionalProperties"].is_object() => {
                format!("{{\"KEY\": {}}}", kind(&spec["additionalProperties"]))
            }
            None => "object".into(),
        },
        other => other.into(),
    }
}

/// The forms one branch of an `anyOf` allows: an enum's values quoted, an object whose
/// single key picks the form (`maxProperties: 1`) one form per key.
fn forms_of(branch: &Value) -> Vec<String> {
    if let Some(values) = branch["enum"].as_array() {
        return values.iter().map(Value::to_string).collect();
    }
    match branch["properties"].as_object() {
        Some(properties) if branch["maxProperties"] == json!(1) => properties
            .iter()
            .map(|(k, v)| format!("{{\"{k}\": {}}}", kind(v)))
            .collect(),
        _ => vec![kind(branch)],
    }
}

fn object_form(properties: &Map<String, Value>) -> String {
    let fields: Vec<String> = properties
        .iter()
        .map(|(k, v)| format!("\"{k}\": {}", kind(v)))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// An example of the arguments: the required ones, a `path` (what a tool that takes one is
/// mostly given), and the first argument that takes one of several forms (to show how one is
/// written); placeholders in capitals.
fn example(properties: &[(String, Value)], required: &[&str], unlisted: &[(&str, Value)]) -> Value {
    let mut args = Map::new();
    for (arg, spec) in properties {
        if required.contains(&arg.as_str()) || arg == "path" {
            args.insert(arg.clone(), sample(arg, spec));
        }
    }
    let chosen = properties.iter().find(|(arg, spec)| {
        !required.contains(&arg.as_str())
            && !unlisted.iter().any(|(shared, _)| shared == arg)
            && spec.get("anyOf").is_some()
    });
    if let Some((arg, spec)) = chosen {
        args.insert(arg.clone(), sample(arg, spec));
    }
    Value::Object(args)
}

fn sample(arg: &str, spec: &Value) -> Value {
    if let Some(first) = spec["enum"].as_array().and_then(|v| v.first()) {
        return first.clone();
    }
    if let Some(forms) = spec["anyOf"].as_array() {
        // An object form shows more of the shape than a plain value.
        let object = forms.iter().find_map(|f| f["properties"].as_object());
        if let Some((key, value)) = object.and_then(|p| p.iter().next()) {
            return json!({ key: sample(key, value) });
        }
        return forms.first().map_or(Value::Null, |f| sample(arg, f));
    }
    if let Some(default) = spec.get("default") {
        return default.clone();
    }
    match spec["type"].as_str() {
        Some("integer") | Some("number") => json!(10),
        Some("boolean") => json!(true),
        Some("array") => json!([sample(arg, &spec["items"])]),
        Some("object") => json!({}),
        _ if arg == "name" => json!("web"),
        _ => json!(arg.to_uppercase()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_of_forms_is_spelled_out() {
        let ready = json!({"anyOf": [
            {"type": "string", "enum": ["app"]},
            {"type": "object", "maxProperties": 1, "properties": {
                "log": {"type": "string"}, "port": {"type": "integer"}}}]});
        assert_eq!(
            kind(&ready),
            r#""app" | {"log": string} | {"port": integer}"#
        );
        assert_eq!(sample("ready", &ready), json!({"log": "LOG"}));
        let group = json!({"type": "string", "enum": ["a", "b"]});
        assert_eq!(kind(&group), "one of: a, b");
        let env = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(kind(&env), r#"{"KEY": string}"#);
        let args = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(kind(&args), "array of string");
    }
}
