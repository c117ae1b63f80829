//! Typed reading of a helper's reply: any `serde::Deserialize` type straight from an Erlang
//! term, so a reply is decoded once into the type that owns it (no JSON in between, no text
//! read back into data). Atoms are strings (`true`/`false` booleans, `undefined`/`nil` none),
//! binaries strings, lists and tuples sequences, maps maps; a pid is a [`Pid`].

use eetf::Term;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// A term that does not have the shape the type asked for.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError(msg.to_string())
    }
}

/// `T` read from `term`.
pub fn decode<'de, T: Deserialize<'de>>(term: &'de Term) -> Result<T, DecodeError> {
    T::deserialize(TermDe(term))
}

/// A process of a node, as the node sent it: rendered as the node's shell would print a local
/// pid (`<0.12.0>`, or `#PID<0.12.0>` in Elixir syntax), which is also how tools take one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pid {
    pub node: String,
    pub id: u32,
    pub serial: u32,
}

impl Pid {
    /// `<0.12.0>`: the local form, which a tool's `pid` argument takes on that node.
    pub fn local(&self) -> String {
        format!("<0.{}.{}>", self.id, self.serial)
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "<0.{}.{}>", self.id, self.serial)
    }
}

/// The name under which a pid travels through serde (a newtype struct of this name).
const PID: &str = "$os_sup_pid";

impl<'de> Deserialize<'de> for Pid {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct PidVisitor;
        impl<'de> Visitor<'de> for PidVisitor {
            type Value = Pid;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pid")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Pid, A::Error> {
                let node: String = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("pid: no node"))?;
                let id = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("pid: no id"))?;
                let serial = seq
                    .next_element()?
                    .ok_or_else(|| de::Error::custom("pid: no serial"))?;
                Ok(Pid { node, id, serial })
            }
            fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<Pid, D::Error> {
                d.deserialize_seq(self)
            }
        }
        d.deserialize_newtype_struct(PID, PidVisitor)
    }
}

impl serde::Serialize for Pid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

struct TermDe<'a>(&'a Term);

fn text(term: &Term) -> Option<String> {
    super::as_text(term)
}

impl<'de> de::Deserializer<'de> for TermDe<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Term::Atom(a) => match a.name.as_str() {
                "true" => v.visit_bool(true),
                "false" => v.visit_bool(false),
                "undefined" | "nil" => v.visit_none(),
                name => v.visit_str(name),
            },
            Term::FixInteger(i) => v.visit_i64(i64::from(i.value)),
            Term::BigInteger(b) => match b.value.to_string().parse::<i64>() {
                Ok(n) => v.visit_i64(n),
                Err(_) => v.visit_f64(b.value.to_string().parse().unwrap_or(f64::MAX)),
            },
            Term::Float(f) => v.visit_f64(f.value),
            Term::Binary(_) | Term::ByteList(_) => v.visit_string(text(self.0).unwrap_or_default()),
            Term::List(l) => v.visit_seq(Seq(l.elements.iter())),
            Term::Tuple(t) => v.visit_seq(Seq(t.elements.iter())),
            Term::Map(m) => v.visit_map(Entries {
                entries: m.map.iter(),
                value: None,
            }),
            // As a newtype, so that a pid stays one through serde's buffering (an untagged enum).
            Term::Pid(p) => {
                v.visit_newtype_struct(de::value::SeqAccessDeserializer::new(PidParts {
                    pid: p,
                    at: 0,
                }))
            }
            other => v.visit_string(other.to_string()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Term::Atom(a) if a.name == "undefined" || a.name == "nil" => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, DecodeError> {
        match (name, self.0) {
            (PID, Term::Pid(p)) => v.visit_seq(PidParts { pid: p, at: 0 }),
            (PID, other) => Err(de::Error::custom(format!(
                "expected a pid, got {}",
                super::brief(other)
            ))),
            _ => v.visit_newtype_struct(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, DecodeError> {
        // Unit variants only: an atom or a binary naming the variant.
        match self.0 {
            Term::Atom(a) => v.visit_enum(a.name.as_str().into_deserializer()),
            other => match text(other) {
                Some(name) => v.visit_enum(name.into_deserializer()),
                None => Err(de::Error::custom(format!(
                    "expected a name, got {}",
                    super::brief(other)
                ))),
            },
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Seq<'a>(std::slice::Iter<'a, Term>);

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = DecodeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        self.0
            .next()
            .map(|t| seed.deserialize(TermDe(t)))
            .transpose()
    }
}

struct Entries<'a> {
    entries: std::collections::hash_map::Iter<'a, Term, Term>,
    value: Option<&'a Term>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = DecodeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(TermDe(key)).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let value = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a map value without its key"))?;
        seed.deserialize(TermDe(value))
    }
}

/// A pid's node, id and serial, as a sequence for [`Pid`]'s visitor.
struct PidParts<'a> {
    pid: &'a eetf::Pid,
    at: u8,
}

impl<'de> SeqAccess<'de> for PidParts<'de> {
    type Error = DecodeError;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        self.at += 1;
        let value: Result<T::Value, DecodeError> = match self.at {
            1 => seed.deserialize(self.pid.node.name.as_str().into_deserializer()),
            2 => seed.deserialize(self.pid.id.into_deserializer()),
            3 => seed.deserialize(self.pid.serial.into_deserializer()),
            _ => return Ok(None),
        };
        value.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::{atom, binary, int, list, map, tuple};

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Leak,
        Cpu,
    }

    #[derive(Debug, Deserialize)]
    struct Found {
        kind: Kind,
        line: String,
        pid: Option<Pid>,
        #[serde(default)]
        site: Option<(String, u32)>,
        next: (String, Vec<(String, Value)>),
        #[serde(default)]
        missing: u64,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    enum Value {
        Pid(Pid),
        Int(i64),
        Text(String),
    }

    #[test]
    fn a_reply_is_read_straight_into_its_types_and_a_pid_stays_a_pid() {
        let pid = Term::from(eetf::Pid::new("web@host", 81, 0, 3));
        let term = map(vec![
            ("kind", atom("leak")),
            ("line", binary("leak: +5/s")),
            ("pid", pid.clone()),
            ("site", tuple(vec![binary("lib/a.ex"), int(12)])),
            (
                "next",
                tuple(vec![
                    atom("process_info"),
                    list(vec![
                        tuple(vec![binary("pid"), pid]),
                        tuple(vec![binary("n"), int(-3)]),
                    ]),
                ]),
            ),
        ]);
        let found: Found = decode(&term).unwrap();
        assert_eq!(found.kind, Kind::Leak);
        assert_eq!(found.line, "leak: +5/s");
        assert_eq!(found.pid.as_ref().unwrap().local(), "<0.81.0>");
        assert_eq!(found.pid.unwrap().node, "web@host");
        assert_eq!(found.site, Some(("lib/a.ex".into(), 12)));
        assert_eq!(found.next.0, "process_info");
        assert!(
            matches!(found.next.1[0].1, Value::Pid(_)),
            "{:?}",
            found.next
        );
        assert_eq!(found.next.1[1].1, Value::Int(-3));
        assert_eq!(found.missing, 0);
        let none = map(vec![
            ("kind", atom("cpu")),
            ("line", binary("")),
            ("pid", atom("undefined")),
            ("next", tuple(vec![atom("logs"), list(vec![])])),
        ]);
        assert!(decode::<Found>(&none).unwrap().pid.is_none());
        let bad = map(vec![("kind", atom("nope"))]);
        assert!(decode::<Found>(&bad).is_err());
    }
}
