//! Metadata filters: which documents a search may return.
//!
//! A filter is a boolean expression over a document's fields, written either as text (the
//! command line's `--filter`) or as JSON (the HTTP API, in Haystack 2's shape). Both give the same
//! [`Filter`]:
//!
//! ```text
//! filter     := or
//! or         := and ("or" and)*
//! and        := unary ("and" unary)*
//! unary      := "not" unary | "(" filter ")" | condition
//! condition  := FIELD ("==" | "=" | "!=" | "<" | "<=" | ">" | ">=") VALUE
//!             | FIELD ["not"] "in" "[" VALUE ("," VALUE)* "]"
//! VALUE      := "double-quoted string" | number | true | false | null
//! FIELD      := letters, digits, "_", "-" and "." (a path into nested metadata)
//! ```
//!
//! ```json
//! {"operator": "AND", "conditions": [
//!   {"field": "meta.year", "operator": ">=", "value": 2023},
//!   {"field": "meta.product", "operator": "in", "value": ["a", "b"]}]}
//! ```
//!
//! Fields: `id`, `title` and `date` are the document's own; any other name (or `meta.NAME`, which
//! also reaches a metadata key called `id`, `title` or `date`) looks the key up in the document's
//! metadata object, following dots into nested objects. Comparison is by type: numbers
//! numerically, two ISO 8601 dates (`2024-03-01`, `1969-07-21T20:17:40`, with or without a UTC
//! offset) by time, other strings by bytes, booleans by equality only. A missing field is `null`:
//! `== null` (the JSON value, or the word `null`) finds documents without the field, an ordering
//! condition with `null` holds for none. A condition whose value has another type than the
//! field's is false, and `!=` / `not in` are exactly its negation (as Elasticsearch's `must_not`).
//! A metadata value that is a list matches when any element does (`tags == "x"`: x is one of the
//! tags).
//!
//! JSON filters follow Haystack's semantics: a date with a UTC offset and one without are compared
//! as if both had the offset, and an ordering condition (`<`, `<=`, `>`, `>=`) with a string
//! value needs an ISO 8601 date (other strings are refused: Haystack orders only dates). Where
//! the two differ: Haystack raises when a document's value cannot be read as a date, lector
//! counts that document as not matching; Haystack compares a list-valued field as a whole, lector
//! element by element; Haystack also reads dates that `dateutil` guesses, lector only ISO 8601.

use serde_json::Value;
use std::fmt;

/// A parsed filter; see the [module docs](self) for its two syntaxes and its semantics.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every filter holds (true when empty).
    And(Vec<Filter>),
    /// At least one filter holds (false when empty).
    Or(Vec<Filter>),
    /// The filter does not hold.
    Not(Box<Filter>),
    /// A field compared with a value.
    Compare {
        /// Where the value is looked up.
        field: Field,
        /// The comparison.
        op: CompareOp,
        /// A string, number or boolean.
        value: Value,
    },
    /// A field's value is one of `values`.
    In {
        /// Where the value is looked up.
        field: Field,
        /// Strings, numbers or booleans.
        values: Vec<Value>,
    },
}

/// What a condition looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// The document id.
    Id,
    /// The document title.
    Title,
    /// The document date (as stored: a string).
    Date,
    /// A path of keys into the metadata object.
    Meta(Vec<String>),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Why a filter was refused: the message names the column (text) or the JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter: {0}")]
pub struct FilterError(pub String);

/// The fields of one document a filter reads.
#[derive(Debug, Clone, Copy)]
pub struct FilterInput<'a> {
    /// The document id.
    pub id: &'a str,
    /// Its title.
    pub title: Option<&'a str>,
    /// Its date.
    pub date: Option<&'a str>,
    /// Its metadata.
    pub metadata: Option<&'a Value>,
}

impl Filter {
    /// Parses the text syntax.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let tokens = tokenize(text)?;
        let mut parser = Parser { tokens, at: 0 };
        let filter = parser.or()?;
        match parser.peek() {
            None => Ok(filter),
            Some((column, token)) => Err(FilterError(format!(
                "unexpected {token} at column {column}; conditions join with `and` or `or`"
            ))),
        }
    }

    /// Parses the JSON syntax (Haystack 2's filter dictionaries).
    pub fn from_json(value: &Value) -> Result<Filter, FilterError> {
        from_json_at(value, "filter")
    }

    /// Whether the document passes.
    pub fn matches(&self, doc: &FilterInput<'_>) -> bool {
        match self {
            Filter::And(all) => all.iter().all(|f| f.matches(doc)),
            Filter::Or(any) => any.iter().any(|f| f.matches(doc)),
            Filter::Not(inner) => !inner.matches(doc),
            Filter::Compare { field, op, value } => match op {
                CompareOp::Ne => !any_value(field, doc, |v| compare(v, CompareOp::Eq, value)),
                _ => any_value(field, doc, |v| compare(v, *op, value)),
            },
            Filter::In { field, values } => {
                any_value(field, doc, |v| values.iter().any(|w| same(v, w)))
            }
        }
    }
}

impl Field {
    fn parse(name: &str) -> Field {
        match name {
            "id" => Field::Id,
            "title" => Field::Title,
            "date" => Field::Date,
            _ => {
                let path = name.strip_prefix("meta.").unwrap_or(name);
                Field::Meta(path.split('.').map(str::to_string).collect())
            }
        }
    }
}

impl fmt::Display for CompareOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        })
    }
}

/// Whether `test` holds for the field's value, or for any element when it is a list.
fn any_value(field: &Field, doc: &FilterInput<'_>, test: impl Fn(&Value) -> bool) -> bool {
    let text = |s: Option<&str>| s.map(|s| Value::String(s.to_string()));
    let found = match field {
        Field::Id => text(Some(doc.id)),
        Field::Title => text(doc.title),
        Field::Date => text(doc.date),
        Field::Meta(path) => {
            let mut at = doc.metadata;
            for key in path {
                at = at.and_then(|v| v.get(key));
            }
            at.cloned()
        }
    };
    match found {
        Some(Value::Array(items)) => items.iter().any(test),
        Some(value) => test(&value),
        None => test(&Value::Null),
    }
}

fn same(a: &Value, b: &Value) -> bool {
    compare(a, CompareOp::Eq, b)
}

/// `a op b` when both have one type; false otherwise. `null` (a missing field) equals only
/// `null` and has no order.
fn compare(a: &Value, op: CompareOp, b: &Value) -> bool {
    let equality = matches!(op, CompareOp::Eq | CompareOp::Ne);
    let ordering = match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().partial_cmp(&y.as_f64()),
        (Value::String(x), Value::String(y)) => match (Instant::parse(x), Instant::parse(y)) {
            (Some(x), Some(y)) => Some(x.cmp_with(&y)),
            _ => Some(x.as_bytes().cmp(y.as_bytes())),
        },
        (Value::Bool(x), Value::Bool(y)) if equality => Some(x.cmp(y)),
        (Value::Null, Value::Null) if equality => Some(std::cmp::Ordering::Equal),
        _ => None,
    };
    let Some(ordering) = ordering else {
        return false;
    };
    match op {
        CompareOp::Eq => ordering.is_eq(),
        CompareOp::Ne => ordering.is_ne(),
        CompareOp::Lt => ordering.is_lt(),
        CompareOp::Le => ordering.is_le(),
        CompareOp::Gt => ordering.is_gt(),
        CompareOp::Ge => ordering.is_ge(),
    }
}

/// A value a condition may compare with: `null` stands for a missing field.
fn scalar(value: &Value) -> bool {
    matches!(
        value,
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null
    )
}

/// A point in time read from an ISO 8601 date (`2024-03-01`) or date and time
/// (`1969-07-21T20:17:40.5+01:00`; `T`, `t` or a space between them, `Z` or an offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Instant {
    /// Seconds since 1970-01-01T00:00 of the written (local) time, and nanoseconds.
    local: (i64, u32),
    /// The UTC offset in seconds, when one is written.
    offset: Option<i64>,
}

impl Instant {
    fn parse(text: &str) -> Option<Instant> {
        let b = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| -> Option<i64> {
            let part = b.get(range)?;
            part.iter()
                .all(u8::is_ascii_digit)
                .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
        };
        if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return None;
        }
        let mut seconds = days_from_civil(year, month, day) * 86_400;
        let (mut nanos, mut offset, mut at) = (0u32, None, 10);
        if at < b.len() {
            if !matches!(b[at], b'T' | b't' | b' ') {
                return None;
            }
            let (hour, minute) = (digits(at + 1..at + 3)?, digits(at + 4..at + 6)?);
            if b[at + 3] != b':' || hour > 23 || minute > 59 {
                return None;
            }
            seconds += hour * 3600 + minute * 60;
            at += 6;
            if b.get(at) == Some(&b':') {
                let second = digits(at + 1..at + 3)?;
                if second > 59 {
                    return None;
                }
                seconds += second;
                at += 3;
                if matches!(b.get(at), Some(b'.' | b',')) {
                    let end = (at + 1..=b.len())
                        .find(|&i| i == b.len() || !b[i].is_ascii_digit())
                        .filter(|&end| end > at + 1)?;
                    let fraction = &text[at + 1..end.min(at + 10)];
                    nanos = format!("{fraction:0<9}").parse().ok()?;
                    at = end;
                }
            }
            match b.get(at) {
                None => {}
                Some(b'Z' | b'z') if at + 1 == b.len() => offset = Some(0),
                Some(sign @ (b'+' | b'-')) => {
                    let hours = digits(at + 1..at + 3)?;
                    let rest = &b[at + 3..];
                    let minutes = match rest {
                        [] => 0,
                        [b':', ..] if rest.len() == 3 => digits(at + 4..at + 6)?,
                        _ if rest.len() == 2 => digits(at + 3..at + 5)?,
                        _ => return None,
                    };
                    let sign = if *sign == b'-' { -1 } else { 1 };
                    offset = Some(sign * (hours * 3600 + minutes * 60));
                }
                _ => return None,
            }
        }
        Some(Instant {
            local: (seconds, nanos),
            offset,
        })
    }

    /// Their order in time; a date without an offset is taken to have the other's, as Haystack
    /// does.
    fn cmp_with(&self, other: &Instant) -> std::cmp::Ordering {
        let utc = |i: &Instant, offset: i64| (i.local.0 - offset, i.local.1);
        match (self.offset, other.offset) {
            (Some(a), Some(b)) => utc(self, a).cmp(&utc(other, b)),
            _ => self.local.cmp(&other.local),
        }
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn from_json_at(value: &Value, at: &str) -> Result<Filter, FilterError> {
    let object = value
        .as_object()
        .ok_or_else(|| FilterError(format!("{at}: expected an object")))?;
    let operator = object
        .get("operator")
        .and_then(Value::as_str)
        .ok_or_else(|| FilterError(format!("{at}.operator: expected a string")))?;
    if let Some(conditions) = object.get("conditions") {
        let list = conditions
            .as_array()
            .ok_or_else(|| FilterError(format!("{at}.conditions: expected a list")))?;
        let parts = list
            .iter()
            .enumerate()
            .map(|(i, c)| from_json_at(c, &format!("{at}.conditions[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        return match operator.to_ascii_uppercase().as_str() {
            "AND" => Ok(Filter::And(parts)),
            "OR" => Ok(Filter::Or(parts)),
            "NOT" => Ok(Filter::Not(Box::new(Filter::And(parts)))),
            _ => Err(FilterError(format!(
                "{at}.operator: `{operator}` does not join conditions (AND, OR or NOT)"
            ))),
        };
    }
    let field = object
        .get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| FilterError(format!("{at}.field: expected a string")))?;
    let value = object
        .get("value")
        .ok_or_else(|| FilterError(format!("{at}.value: missing")))?;
    let field = Field::parse(field);
    let values = |what: &str| -> Result<Vec<Value>, FilterError> {
        match value.as_array() {
            Some(list) if list.iter().all(scalar) => Ok(list.clone()),
            _ => Err(FilterError(format!(
                "{at}.value: `{what}` needs a list of strings, numbers, booleans or nulls"
            ))),
        }
    };
    let op = match operator {
        "in" => return Ok(Filter::In { field, values: values("in")? }),
        "not in" => {
            let values = values("not in")?;
            return Ok(Filter::Not(Box::new(Filter::In { field, values })));
        }
        "==" => CompareOp::Eq,
        "!=" => CompareOp::Ne,
        "<" => CompareOp::Lt,
        "<=" => CompareOp::Le,
        ">" => CompareOp::Gt,
        ">=" => CompareOp::Ge,
        other => {
            return Err(FilterError(format!(
                "{at}.operator: unknown operator `{other}` (==, !=, <, <=, >, >=, in, not in, AND, OR, NOT)"
            )))
        }
    };
    if !scalar(value) {
        return Err(FilterError(format!(
            "{at}.value: `{op}` needs a string, number, boolean or null"
        )));
    }
    let ordering = !matches!(op, CompareOp::Eq | CompareOp::Ne);
    if let Value::String(text) = value {
        if ordering && Instant::parse(text).is_none() {
            return Err(FilterError(format!(
                "{at}.value: `{op}` orders numbers and ISO 8601 dates (such as 2024-03-01 or \
                 2024-03-01T12:00:00), not the string {value}"
            )));
        }
    }
    Ok(Filter::Compare {
        field,
        op,
        value: value.clone(),
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Op(CompareOp),
    Value(Value),
    Open,
    Close,
    OpenList,
    CloseList,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "`{w}`"),
            Token::Op(op) => write!(f, "`{op}`"),
            Token::Value(v) => write!(f, "value {v}"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
            Token::OpenList => f.write_str("`[`"),
            Token::CloseList => f.write_str("`]`"),
            Token::Comma => f.write_str("`,`"),
        }
    }
}

/// Tokens with their 1-based columns (in characters).
fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, FilterError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let (token, width) = match c {
            _ if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            '[' => (Token::OpenList, 1),
            ']' => (Token::CloseList, 1),
            ',' => (Token::Comma, 1),
            '"' => quoted(&chars, i)?,
            _ if two == "==" => (Token::Op(CompareOp::Eq), 2),
            _ if two == "!=" => (Token::Op(CompareOp::Ne), 2),
            _ if two == "<=" => (Token::Op(CompareOp::Le), 2),
            _ if two == ">=" => (Token::Op(CompareOp::Ge), 2),
            '=' => (Token::Op(CompareOp::Eq), 1),
            '<' => (Token::Op(CompareOp::Lt), 1),
            '>' => (Token::Op(CompareOp::Gt), 1),
            _ if c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '+') => {
                let end = (i..chars.len())
                    .find(|&j| {
                        !(chars[j].is_alphanumeric() || matches!(chars[j], '_' | '-' | '.' | '+'))
                    })
                    .unwrap_or(chars.len());
                let word: String = chars[i..end].iter().collect();
                (bare(word), end - i)
            }
            _ => {
                return Err(FilterError(format!(
                    "unexpected character `{c}` at column {column}"
                )))
            }
        };
        out.push((column, token));
        i += width;
    }
    Ok(out)
}

/// A bare word: a number, a boolean, or a name (field or keyword).
fn bare(word: String) -> Token {
    match word.as_str() {
        "true" => Token::Value(Value::Bool(true)),
        "false" => Token::Value(Value::Bool(false)),
        "null" => Token::Value(Value::Null),
        _ => match serde_json::from_str::<serde_json::Number>(&word) {
            Ok(n) if word.starts_with(|c: char| c.is_ascii_digit() || c == '-') => {
                Token::Value(Value::Number(n))
            }
            _ => Token::Word(word),
        },
    }
}

/// A double-quoted string starting at `start`, with `\"` and `\\` escapes.
fn quoted(chars: &[char], start: usize) -> Result<(Token, usize), FilterError> {
    let mut value = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '"' => return Ok((Token::Value(Value::String(value)), i + 1 - start)),
            '\\' if i + 1 < chars.len() => {
                value.push(chars[i + 1]);
                i += 2;
            }
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    Err(FilterError(format!(
        "the string opened at column {} is not closed",
        start + 1
    )))
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&(usize, Token)> {
        self.tokens.get(self.at)
    }

    fn next(&mut self, expected: &str) -> Result<(usize, Token), FilterError> {
        let found = self.tokens.get(self.at).cloned();
        self.at += 1;
        found.ok_or_else(|| FilterError(format!("the filter ends where {expected} was expected")))
    }

    fn keyword(&mut self, word: &str) -> bool {
        let found = matches!(self.peek(), Some((_, Token::Word(w))) if w == word);
        self.at += usize::from(found);
        found
    }

    fn or(&mut self) -> Result<Filter, FilterError> {
        let mut parts = vec![self.and()?];
        while self.keyword("or") {
            parts.push(self.and()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Filter::Or(parts)
        })
    }

    fn and(&mut self) -> Result<Filter, FilterError> {
        let mut parts = vec![self.unary()?];
        while self.keyword("and") {
            parts.push(self.unary()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Filter::And(parts)
        })
    }

    fn unary(&mut self) -> Result<Filter, FilterError> {
        if self.keyword("not") {
            return Ok(Filter::Not(Box::new(self.unary()?)));
        }
        if matches!(self.peek(), Some((_, Token::Open))) {
            self.at += 1;
            let inner = self.or()?;
            return match self.next("`)`")? {
                (_, Token::Close) => Ok(inner),
                (column, token) => Err(FilterError(format!(
                    "expected `)` at column {column}, found {token}"
                ))),
            };
        }
        self.condition()
    }

    fn condition(&mut self) -> Result<Filter, FilterError> {
        let (column, token) = self.next("a field name")?;
        let Token::Word(name) = token else {
            return Err(FilterError(format!(
                "expected a field name at column {column}, found {token}"
            )));
        };
        let field = Field::parse(&name);
        let negated = self.keyword("not");
        if self.keyword("in") {
            let values = self.list()?;
            let filter = Filter::In { field, values };
            return Ok(if negated {
                Filter::Not(Box::new(filter))
            } else {
                filter
            });
        }
        let (column, token) = self.next("an operator")?;
        match (negated, token) {
            (false, Token::Op(op)) => Ok(Filter::Compare {
                field,
                op,
                value: self.value()?,
            }),
            (_, token) => Err(FilterError(format!(
                "expected an operator (==, !=, <, <=, >, >=, in, not in) after `{name}` at column {column}, found {token}"
            ))),
        }
    }

    fn value(&mut self) -> Result<Value, FilterError> {
        match self.next("a value")? {
            (_, Token::Value(v)) => Ok(v),
            (column, token) => Err(FilterError(format!(
                "expected a value (\"text\", a number, true, false or null) at column {column}, found {token}"
            ))),
        }
    }

    fn list(&mut self) -> Result<Vec<Value>, FilterError> {
        match self.next("`[`")? {
            (_, Token::OpenList) => {}
            (column, token) => {
                return Err(FilterError(format!(
                    "expected `[` after `in` at column {column}, found {token}"
                )))
            }
        }
        let mut values = vec![self.value()?];
        loop {
            match self.next("`]`")? {
                (_, Token::CloseList) => return Ok(values),
                (_, Token::Comma) => values.push(self.value()?),
                (column, token) => {
                    return Err(FilterError(format!(
                        "expected `,` or `]` at column {column}, found {token}"
                    )))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc<'a>(id: &'a str, metadata: &'a Value) -> FilterInput<'a> {
        FilterInput {
            id,
            title: Some("Manual"),
            date: Some("2024-03-01"),
            metadata: Some(metadata),
        }
    }

    #[test]
    fn text_and_json_give_one_filter() {
        let text = Filter::parse(r#"year >= 2023 and product in ["a", "b"]"#).unwrap();
        let json = Filter::from_json(&json!({"operator": "AND", "conditions": [
            {"field": "meta.year", "operator": ">=", "value": 2023},
            {"field": "product", "operator": "in", "value": ["a", "b"]}]}))
        .unwrap();
        assert_eq!(text, json);
    }

    #[test]
    fn conditions_compare_by_type_and_lists_match_any_element() {
        let meta =
            json!({"year": 2024, "product": "a", "tags": ["x", "y"], "owner": {"team": "qa"}});
        let d = doc("manual.pdf", &meta);
        let holds = |text: &str| Filter::parse(text).unwrap().matches(&d);
        assert!(holds("year >= 2023 and product in [\"a\", \"b\"]"));
        assert!(!holds("year > 2024"));
        assert!(holds("year == 2024.0"), "numbers compare numerically");
        assert!(!holds("year == \"2024\""), "a string is not a number");
        assert!(holds("tags == \"y\" and not tags == \"z\""));
        assert!(holds("owner.team = \"qa\""));
        assert!(holds("date >= \"2024-01-01\" and date < \"2024-12-31\""));
        assert!(holds("id == \"manual.pdf\" or missing == 1"));
        assert!(!holds("missing == 1"), "a missing field matches nothing");
        assert!(holds("missing != 1"), "!= is the negation of ==");
        assert!(holds("product not in [\"b\", \"c\"]"));
        assert!(holds("not (year < 2000 or product == \"b\")"));
        assert!(holds("meta.title == \"x\" or title == \"Manual\""));
    }

    #[test]
    fn missing_fields_are_null_and_dates_order_by_time() {
        let meta = json!({"number": 2, "when": "1969-07-21T20:17:40", "empty": null});
        let d = doc("a", &meta);
        let json = |value: Value| Filter::from_json(&value).unwrap().matches(&d);
        let cond = |field: &str, op: &str, value: Value| {
            json(json!({"field": field, "operator": op, "value": value}))
        };
        assert!(cond("meta.missing", "==", Value::Null));
        assert!(
            cond("meta.empty", "==", Value::Null),
            "an explicit null is missing too"
        );
        assert!(!cond("meta.number", "==", Value::Null));
        assert!(cond("meta.number", "!=", Value::Null));
        assert!(cond("meta.missing", "in", json!([1, null])));
        for op in [">", ">=", "<", "<="] {
            assert!(
                !cond("meta.missing", op, Value::Null),
                "{op} null holds for none"
            );
            assert!(
                !cond("meta.number", op, Value::Null),
                "{op} null holds for none"
            );
        }
        assert!(cond("meta.when", ">", json!("1969-07-21T20:17:39.999")));
        assert!(cond("meta.when", "<", json!("1969-07-22")));
        assert!(
            cond("meta.when", "==", json!("1969-07-21 20:17:40.000")),
            "one instant, two forms"
        );
        assert!(
            cond("meta.when", "==", json!("1969-07-21T20:17:40-05:00")),
            "naive takes the offset"
        );
        assert!(cond("meta.when", "==", json!("1969-07-21T20:17:40Z")));
        let utc = json!({"at": "2024-03-01T00:30:00+01:00"});
        let d = doc("b", &utc);
        assert!(Filter::parse(r#"at < "2024-03-01T00:00:00Z""#)
            .unwrap()
            .matches(&d));
        assert!(Filter::parse(r#"at == "2024-02-29T23:30:00+00:00""#)
            .unwrap()
            .matches(&d));
        assert!(Filter::parse("missing == null and not at == null")
            .unwrap()
            .matches(&d));
        for bad in [
            "2024-02-30",
            "2023-13-01",
            "2024-03-01T24:00",
            "2024-03-01x",
            "20240301",
        ] {
            assert_eq!(Instant::parse(bad), None, "{bad}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn json_orders_only_numbers_and_dates() {
        let err =
            Filter::from_json(&json!({"field": "meta.number", "operator": ">", "value": "1"}))
                .unwrap_err();
        assert!(
            err.0.contains("filter.value") && err.0.contains("ISO 8601"),
            "{err}"
        );
        assert!(Filter::from_json(&json!({"field": "n", "operator": "==", "value": "1"})).is_ok());
        assert!(Filter::from_json(&json!({"field": "n", "operator": ">", "value": [1]})).is_err());
        // The text syntax keeps byte order for other strings.
        let meta = json!({"name": "beta"});
        assert!(Filter::parse(r#"name > "alpha""#)
            .unwrap()
            .matches(&doc("c", &meta)));
    }

    #[test]
    fn errors_name_the_place() {
        let err = |text: &str| Filter::parse(text).unwrap_err().0;
        assert!(
            err("year >= ").contains("ends where a value"),
            "{}",
            err("year >= ")
        );
        assert!(err("year >= 2023 product == 1").contains("column 14"));
        assert!(err("year ~ 1").contains("column 6"));
        assert!(err("name == \"open").contains("not closed"));
        assert!(err("tags in \"x\"").contains("expected `[`"));
        let json = Filter::from_json(&json!({"operator": "AND", "conditions": [
            {"field": "year", "operator": "=~", "value": 1}]}))
        .unwrap_err();
        assert!(json.0.contains("filter.conditions[0].operator"), "{json}");
        let json =
            Filter::from_json(&json!({"field": "year", "operator": "in", "value": 1})).unwrap_err();
        assert!(json.0.contains("filter.value"), "{json}");
    }
}
