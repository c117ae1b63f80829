//! Argument names checked against a tool's input schema before it runs. An unknown name is a
//! mistake the agent can fix (a tool error naming the valid ones, with a did-you-mean), never
//! silently ignored, which would run the tool with a default the agent did not mean; a
//! missing required one is named with the tool's arguments, the same way.

use rmcp::model::{JsonObject, Tool};

/// `Err(message)` when `arguments` holds a name `tool` does not take (one its schema lists,
/// or one of the `shared` arguments it takes unlisted), or lacks one it requires.
pub fn check(tool: &Tool, shared: &[&str], arguments: Option<&JsonObject>) -> Result<(), String> {
    let none = JsonObject::new();
    let arguments = arguments.unwrap_or(&none);
    let mut valid: Vec<&str> = tool
        .input_schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    valid.extend(shared);
    let unknown: Vec<&str> = arguments
        .keys()
        .map(String::as_str)
        .filter(|name| !valid.contains(name))
        .collect();
    let Some(first) = unknown.first() else {
        let missing: Vec<&str> = tool
            .input_schema
            .get("required")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str())
            .filter(|name| !arguments.contains_key(*name))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        return Err(format!(
            "missing argument{} {} for `{}`. Valid: {}.",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            tool.name,
            valid.join(", ")
        ));
    };
    let mut message = format!(
        "unknown argument{} {} for `{}`",
        if unknown.len() > 1 { "s" } else { "" },
        unknown.join(", "),
        tool.name
    );
    if let Some(guess) = closest(first, &valid) {
        message += &format!("; did you mean `{guess}`?");
    }
    message += &format!(" Valid: {}.", valid.join(", "));
    Err(message)
}

/// The valid name nearest to `given` (edit distance, or one containing the other), if any is
/// near enough to be a likely typo.
fn closest<'a>(given: &str, valid: &[&'a str]) -> Option<&'a str> {
    let given = given.to_ascii_lowercase();
    valid
        .iter()
        .map(|v| {
            let contains = v.contains(given.as_str()) || given.contains(v);
            let distance = if contains {
                1
            } else {
                edit_distance(&given, v)
            };
            (distance, *v)
        })
        .filter(|(distance, v)| *distance <= (v.len().max(given.len()) / 3).max(2))
        .min()
        .map(|(_, v)| v)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Tool {
        let schema = serde_json::json!({"type": "object", "properties": {
            "name": {}, "sort_by": {}, "limit": {}, "window_ms": {}}});
        Tool::new(
            "processes",
            "",
            std::sync::Arc::new(schema.as_object().unwrap().clone()),
        )
    }

    fn args(value: serde_json::Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn known_arguments_pass() {
        assert!(check(
            &tool(),
            &[],
            Some(&args(serde_json::json!({"name": "x", "limit": 3})))
        )
        .is_ok());
        assert!(check(&tool(), &[], None).is_ok());
        let format = args(serde_json::json!({"name": "x", "format": "erlang"}));
        assert!(check(&tool(), &["format"], Some(&format)).is_ok());
        assert!(check(&tool(), &[], Some(&format)).is_err());
    }

    #[test]
    fn unknown_arguments_name_a_guess_and_the_valid_ones() {
        let error = check(
            &tool(),
            &[],
            Some(&args(serde_json::json!({"name": "x", "sort": "memory"}))),
        )
        .unwrap_err();
        assert!(
            error.starts_with("unknown argument sort for `processes`; did you mean `sort_by`?"),
            "{error}"
        );
        assert!(
            error.contains("Valid: limit, name, sort_by, window_ms."),
            "{error}"
        );
        let error = check(
            &tool(),
            &[],
            Some(&args(serde_json::json!({"windw_ms": 1}))),
        )
        .unwrap_err();
        assert!(error.contains("did you mean `window_ms`"), "{error}");
        let error = check(&tool(), &[], Some(&args(serde_json::json!({"zzzzzz": 1})))).unwrap_err();
        assert!(!error.contains("did you mean"), "{error}");
    }

    #[test]
    fn missing_required_arguments_are_named_with_the_valid_ones() {
        let mut tool = tool();
        let mut schema = tool.input_schema.as_ref().clone();
        schema.insert("required".into(), serde_json::json!(["name", "limit"]));
        tool.input_schema = std::sync::Arc::new(schema);
        let error = check(&tool, &[], Some(&args(serde_json::json!({"limit": 3})))).unwrap_err();
        assert_eq!(
            error,
            "missing argument name for `processes`. Valid: limit, name, sort_by, window_ms."
        );
        let error = check(&tool, &[], None).unwrap_err();
        assert!(
            error.starts_with("missing arguments name, limit"),
            "{error}"
        );
    }
}
