//! Building and reading Erlang terms (`eetf`), so the layers above never match on raw terms.
//!
//! Text always travels as binaries: eetf encodes lists of small integers as Erlang strings and
//! mangles negative numbers in them.

mod decode;

pub use decode::{decode, DecodeError, Pid};
use eetf::{Atom, BigInteger, Binary, FixInteger, Map, Term, Tuple};
use std::collections::HashMap;

pub fn atom(name: &str) -> Term {
    Term::from(Atom::from(name))
}

pub fn binary(text: &str) -> Term {
    Term::from(Binary::from(text.as_bytes().to_vec()))
}

pub fn tuple(elements: Vec<Term>) -> Term {
    Term::from(Tuple::from(elements))
}

pub fn list(elements: Vec<Term>) -> Term {
    Term::List(eetf::List::from(elements))
}

pub fn int(value: i64) -> Term {
    match i32::try_from(value) {
        Ok(small) => Term::from(FixInteger::from(small)),
        Err(_) => Term::from(BigInteger::from(value)),
    }
}

/// A map with atom keys.
pub fn map(entries: Vec<(&str, Term)>) -> Term {
    let map: HashMap<Term, Term> = entries.into_iter().map(|(k, v)| (atom(k), v)).collect();
    Term::from(Map::from(map))
}

/// The atom's name, if `term` is an atom.
pub fn as_atom(term: &Term) -> Option<&str> {
    match term {
        Term::Atom(a) => Some(&a.name),
        _ => None,
    }
}

/// Text from a binary (lossy UTF-8) or from a charlist.
pub fn as_text(term: &Term) -> Option<String> {
    match term {
        Term::Binary(b) => Some(String::from_utf8_lossy(&b.bytes).into_owned()),
        Term::ByteList(l) => Some(String::from_utf8_lossy(&l.bytes).into_owned()),
        Term::List(l) if l.elements.is_empty() => Some(String::new()),
        _ => None,
    }
}

pub fn as_i64(term: &Term) -> Option<i64> {
    match term {
        Term::FixInteger(i) => Some(i64::from(i.value)),
        Term::BigInteger(b) => b.value.to_string().parse().ok(),
        _ => None,
    }
}

pub fn as_bool(term: &Term) -> Option<bool> {
    match as_atom(term)? {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The value under atom key `key` of a map term.
pub fn get<'a>(map: &'a Term, key: &str) -> Option<&'a Term> {
    match map {
        Term::Map(m) => m.map.get(&atom(key)),
        _ => None,
    }
}

/// Splits `{Tag, Value}` into its atom tag and value.
pub fn tagged(term: Term) -> Option<(String, Term)> {
    match term {
        Term::Tuple(Tuple { mut elements }) if elements.len() == 2 => {
            let value = elements.pop()?;
            let tag = as_atom(&elements[0])?.to_string();
            Some((tag, value))
        }
        _ => None,
    }
}

/// Plain data from the helper as JSON: atoms become strings (`true`/`false` booleans,
/// `undefined`/`nil` null), binaries strings, tuples and lists arrays, maps objects. Nesting
/// deeper than `MAX_JSON_DEPTH` is cut with a marker (the helper's replies are far shallower).
pub fn to_json(term: &Term) -> serde_json::Value {
    to_json_at(term, 0)
}

const MAX_JSON_DEPTH: usize = 64;

fn to_json_at(term: &Term, depth: usize) -> serde_json::Value {
    use serde_json::Value;
    if depth > MAX_JSON_DEPTH {
        return Value::String("...(too deep)".into());
    }
    let all =
        |items: &[Term]| Value::Array(items.iter().map(|t| to_json_at(t, depth + 1)).collect());
    match term {
        Term::Atom(a) => match a.name.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "undefined" | "nil" => Value::Null,
            name => Value::String(name.to_string()),
        },
        Term::FixInteger(i) => Value::from(i.value),
        Term::BigInteger(b) => match b.value.to_string().parse::<i64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(b.value.to_string()),
        },
        Term::Float(f) => serde_json::Number::from_f64(f.value).map_or(Value::Null, Value::Number),
        Term::Binary(b) => Value::String(String::from_utf8_lossy(&b.bytes).into_owned()),
        Term::ByteList(l) => Value::Array(l.bytes.iter().map(|b| Value::from(*b)).collect()),
        Term::List(l) => all(&l.elements),
        Term::ImproperList(l) => {
            let mut items: Vec<Value> = l
                .elements
                .iter()
                .map(|t| to_json_at(t, depth + 1))
                .collect();
            items.push(to_json_at(&l.last, depth + 1));
            Value::Array(items)
        }
        Term::Tuple(t) => all(&t.elements),
        Term::Map(m) => {
            let mut object = serde_json::Map::new();
            for (k, v) in &m.map {
                let key = match k {
                    Term::Atom(a) => a.name.clone(),
                    Term::Binary(b) => String::from_utf8_lossy(&b.bytes).into_owned(),
                    other => other.to_string(),
                };
                object.insert(key, to_json_at(v, depth + 1));
            }
            Value::Object(object)
        }
        other => Value::String(other.to_string()),
    }
}

/// Short, bounded Erlang-syntax text of a term, for error messages about unexpected replies.
pub fn brief(term: &Term) -> String {
    let mut text = term.to_string();
    if text.len() > 300 {
        let cut = (0..=300)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_and_large_numbers_round_trip() {
        for n in [-1i64, -70000, 0, 65, i64::from(i32::MAX) + 1, i64::MIN + 1] {
            let mut buf = Vec::new();
            int(n).encode(&mut buf).unwrap();
            let back = Term::decode(buf.as_slice()).unwrap();
            assert_eq!(as_i64(&back), Some(n), "{n}");
        }
    }

    #[test]
    fn text_travels_as_binary_even_with_high_bytes() {
        let mut buf = Vec::new();
        binary("héllo\u{1F600}").encode(&mut buf).unwrap();
        let back = Term::decode(buf.as_slice()).unwrap();
        assert_eq!(as_text(&back).as_deref(), Some("héllo\u{1F600}"));
    }

    #[test]
    fn helper_data_becomes_json() {
        let data = map(vec![
            (
                "rows",
                Term::from(eetf::List::from(vec![tuple(vec![int(1), binary("a")])])),
            ),
            ("ready", atom("true")),
            ("app", atom("undefined")),
            ("kind", atom("worker")),
            ("big", int(i64::from(i32::MAX) + 7)),
        ]);
        let json = to_json(&data);
        assert_eq!(json["rows"], serde_json::json!([[1, "a"]]));
        assert_eq!(json["ready"], serde_json::json!(true));
        assert!(json["app"].is_null());
        assert_eq!(json["kind"], "worker");
        assert_eq!(json["big"], serde_json::json!(i64::from(i32::MAX) + 7));
    }

    #[test]
    fn reads_maps_and_tagged_tuples() {
        let m = map(vec![("ready", atom("true")), ("n", int(3))]);
        assert_eq!(get(&m, "ready").and_then(as_bool), Some(true));
        assert_eq!(get(&m, "n").and_then(as_i64), Some(3));
        let (tag, value) = tagged(tuple(vec![atom("ok"), m])).unwrap();
        assert_eq!(tag, "ok");
        assert!(get(&value, "missing").is_none());
    }
}
