//! Metadata filters as RediSearch queries.
//!
//! Every passage carries, in its `tags` TAG field, one tag per (field, value) that an equality
//! could match in its document: the id, the title, the date and every scalar in the metadata,
//! reached through nested objects, with each element of a list. A tag is a digest of the field's
//! path, the value's JSON type and the value (numbers in one canonical form, since filters compare
//! them numerically), so no value needs escaping and `year == 2023` never matches the string
//! `"2023"`, exactly as [`lector_index::Filter::matches`] decides. lector's own structural fields
//! ([`STRUCTURAL_FIELDS`]: a PDF's page starts, a document's sections, its file's attributes) are
//! not tagged, since a long PDF's page list alone would make thousands of tags per passage;
//! filters on them are refused. `==` and `in` become tag
//! matches, `!=`, `not` and `not in` their negation, `and` and `or` RediSearch's intersection and
//! union. Range conditions (`<`, `<=`, `>`, `>=`) and `null` (a missing field) have no tag form
//! and are refused; a date equals only the same string (the embedded index also equates one
//! instant written in two ISO 8601 forms).

use lector_index::filter::{CompareOp, Field};
use lector_index::{Document, Filter};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The metadata fields lector writes for its own use, which carry no tags.
pub(crate) const STRUCTURAL_FIELDS: [&str; 3] = ["pages", "sections", "file"];

/// What a filter leaves of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Every passage.
    All,
    /// No passage.
    Nothing,
    /// The passages this RediSearch query matches.
    Query(String),
}

/// `filter` as a RediSearch query over the `tags` field; an error names a condition that has no
/// tag form.
pub(crate) fn selection(filter: &Filter) -> Result<Selection, String> {
    Ok(match filter {
        Filter::And(all) => {
            let mut parts = Vec::new();
            for part in all {
                match selection(part)? {
                    Selection::Nothing => return Ok(Selection::Nothing),
                    Selection::All => {}
                    Selection::Query(q) => parts.push(q),
                }
            }
            match parts.len() {
                0 => Selection::All,
                _ => Selection::Query(format!("({})", parts.join(" "))),
            }
        }
        Filter::Or(any) => {
            let mut parts = Vec::new();
            for part in any {
                match selection(part)? {
                    Selection::All => return Ok(Selection::All),
                    Selection::Nothing => {}
                    Selection::Query(q) => parts.push(q),
                }
            }
            match parts.len() {
                0 => Selection::Nothing,
                _ => Selection::Query(format!("({})", parts.join("|"))),
            }
        }
        Filter::Not(inner) => negated(selection(inner)?),
        Filter::Compare { field, .. } | Filter::In { field, .. } if is_structural(field) => {
            return Err(format!(
                "`{}` is lector's own structure, not filterable on a Redis store (its fields {} carry no tags)",
                field_name(field),
                STRUCTURAL_FIELDS.join(", ")
            ))
        }
        Filter::Compare {
            field,
            value: Value::Null,
            ..
        } => return Err(null_refused(field)),
        Filter::In { field, values } if values.contains(&Value::Null) => {
            return Err(null_refused(field))
        }
        Filter::Compare { field, op, value } => match op {
            CompareOp::Eq => any_tag(field, std::slice::from_ref(value)),
            CompareOp::Ne => negated(any_tag(field, std::slice::from_ref(value))),
            _ => {
                return Err(format!(
                    "range conditions (`<`, `<=`, `>`, `>=`, here on `{}`) are not supported on a Redis store; \
                     equality, `in`, `not`, `and` and `or` are",
                    field_name(field)
                ))
            }
        },
        Filter::In { field, values } => any_tag(field, values),
    })
}

fn null_refused(field: &Field) -> String {
    format!(
        "`null` (a missing field, here `{}`) is not supported on a Redis store: its tags record \
         the values documents have, not the fields they lack",
        field_name(field)
    )
}

fn is_structural(field: &Field) -> bool {
    matches!(field, Field::Meta(path) if path.first().is_some_and(|f| STRUCTURAL_FIELDS.contains(&f.as_str())))
}

fn negated(selection: Selection) -> Selection {
    match selection {
        Selection::All => Selection::Nothing,
        Selection::Nothing => Selection::All,
        Selection::Query(q) => Selection::Query(format!("-{q}")),
    }
}

/// Passages whose document has `field` equal to one of `values` (values of no comparable type,
/// such as objects, match nothing, as in the embedded index).
fn any_tag(field: &Field, values: &[Value]) -> Selection {
    let (kind, path) = field_path(field);
    let tags: Vec<String> = values.iter().filter_map(|v| tag(kind, path, v)).collect();
    match tags.is_empty() {
        true => Selection::Nothing,
        false => Selection::Query(format!("@tags:{{{}}}", tags.join("|"))),
    }
}

/// The tags of a document, joined for the `tags` field.
pub(crate) fn document_tags(doc: &Document) -> String {
    let mut tags = Vec::new();
    let mut own = |kind: &str, value: &Option<String>| {
        if let Some(v) = value {
            tags.extend(tag(kind, &[], &Value::String(v.clone())));
        }
    };
    own("id", &Some(doc.id.clone()));
    own("title", &doc.title);
    own("date", &doc.date);
    if let Some(metadata) = &doc.metadata {
        let mut path = Vec::new();
        metadata_tags(metadata, &mut path, &mut tags);
    }
    tags.sort();
    tags.dedup();
    tags.join(",")
}

/// The tags of every scalar under `value` (at `path`), through nested objects; a list's scalar
/// elements each at the list's path.
fn metadata_tags(value: &Value, path: &mut Vec<String>, tags: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, inner) in fields {
                if path.is_empty() && STRUCTURAL_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                path.push(key.clone());
                metadata_tags(inner, path, tags);
                path.pop();
            }
        }
        Value::Array(items) if !path.is_empty() => {
            tags.extend(items.iter().filter_map(|item| tag("meta", path, item)))
        }
        scalar => tags.extend(tag("meta", path, scalar)),
    }
}

/// The tag of `value` at a field: a 128-bit digest in hex. `None` for values no condition
/// can equal (null, lists, objects).
fn tag(kind: &str, path: &[String], value: &Value) -> Option<String> {
    let typed = match value {
        Value::String(s) => json!(["s", s]),
        Value::Bool(b) => json!(["b", b]),
        // Compared as f64 (`Filter::matches`): equal numbers must give one tag.
        Value::Number(n) => json!(["n", canonical(n.as_f64()?)]),
        _ => return None,
    };
    let digest = Sha256::digest(json!([kind, path, typed]).to_string());
    Some(digest[..16].iter().map(|b| format!("{b:02x}")).collect())
}

fn canonical(x: f64) -> String {
    if x == 0.0 {
        return "0".into(); // -0 == 0
    }
    format!("{x:e}")
}

fn field_path(field: &Field) -> (&'static str, &[String]) {
    match field {
        Field::Id => ("id", &[]),
        Field::Title => ("title", &[]),
        Field::Date => ("date", &[]),
        Field::Meta(path) => ("meta", path),
    }
}

fn field_name(field: &Field) -> String {
    match field {
        Field::Meta(path) => format!("meta.{}", path.join(".")),
        other => field_path(other).0.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(metadata: Value) -> Document {
        Document {
            metadata: Some(metadata),
            ..Document::new("d1", "text")
        }
    }

    #[test]
    fn equal_numbers_share_a_tag_and_types_do_not() {
        let d = doc(json!({"year": 2023, "tags": ["a", 2], "nested": {"x": true}}));
        let tags = document_tags(&d);
        let has = |filter: &str| {
            let Selection::Query(q) = selection(&Filter::parse(filter).unwrap()).unwrap() else {
                panic!("{filter}")
            };
            let wanted = q.trim_start_matches("@tags:{").trim_end_matches('}');
            wanted
                .split('|')
                .any(|t| tags.split(',').any(|have| have == t))
        };
        assert!(has("year == 2023.0"));
        assert!(!has(r#"year == "2023""#));
        assert!(has(r#"tags == "a""#));
        assert!(has("tags == 2"));
        assert!(has("nested.x == true"));
        assert!(has(r#"id == "d1""#));
        assert!(!has(r#"meta.id == "d1""#));
    }

    #[test]
    fn structural_fields_carry_no_tags_and_are_not_filterable() {
        // A 1,000-page PDF's page starts, sections and file: no tags (there were 1,000+ per
        // passage); its own fields keep theirs.
        let pages: Vec<usize> = (0..1_000).map(|p| p * 2_000).collect();
        let d = doc(json!({
            "pages": pages,
            "sections": [{"start": 0, "level": 1, "title": "Intro"}],
            "file": {"path": "a.pdf", "bytes": 10},
            "author": "Ada",
            "nested": {"pages": 3},
        }));
        // id, author and nested.pages.
        assert_eq!(document_tags(&d).split(',').count(), 3);
        for refused in ["pages == 0", r#"file.path == "a.pdf""#, "sections in [1]"] {
            let err = selection(&Filter::parse(refused).unwrap()).unwrap_err();
            assert!(err.contains("lector's own structure"), "{refused}: {err}");
        }
        assert!(selection(&Filter::parse("nested.pages == 3").unwrap()).is_ok());
    }

    #[test]
    fn null_is_refused_by_name() {
        for refused in [
            "author == null",
            "author != null",
            "author in [\"Ada\", null]",
        ] {
            let err = selection(&Filter::parse(refused).unwrap()).unwrap_err();
            assert!(
                err.contains("`null`") && err.contains("meta.author"),
                "{refused}: {err}"
            );
        }
    }

    #[test]
    fn combinations_become_queries_and_ranges_are_refused() {
        let q = |text: &str| selection(&Filter::parse(text).unwrap());
        assert!(
            matches!(q(r#"a == 1 and (b == "x" or not c in [1, 2])"#), Ok(Selection::Query(s)) if s.starts_with("(@tags:{"))
        );
        let none = Filter::In {
            field: Field::Meta(vec!["a".into()]),
            values: Vec::new(),
        };
        assert_eq!(selection(&none).unwrap(), Selection::Nothing);
        assert_eq!(
            selection(&Filter::Not(Box::new(none))).unwrap(),
            Selection::All
        );
        assert!(matches!(q("a != 1"), Ok(Selection::Query(s)) if s.starts_with("-@tags:{")));
        let err = q("year >= 2020").unwrap_err();
        assert!(err.contains("meta.year"), "{err}");
    }
}
