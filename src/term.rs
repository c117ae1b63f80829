//! Building and reading Erlang terms (`eetf`), so the layers above never match on raw terms.
//!
//! Text always travels as binaries: eetf encodes small-integer lists as strings and mangles
//! negative numbers in them (see DESIGN.md).

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
    fn reads_maps_and_tagged_tuples() {
        let m = map(vec![("ready", atom("true")), ("n", int(3))]);
        assert_eq!(get(&m, "ready").and_then(as_bool), Some(true));
        assert_eq!(get(&m, "n").and_then(as_i64), Some(3));
        let (tag, value) = tagged(tuple(vec![atom("ok"), m])).unwrap();
        assert_eq!(tag, "ok");
        assert!(get(&value, "missing").is_none());
    }
}
