//! A libpq connection string read as the PostgreSQL driver (`tokio-postgres`) reads it, with the
//! byte span of every part, so that `config.rs` can take its own parameters out and mask the
//! password exactly where the driver finds them:
//!
//! - URL form, `postgres://` or `postgresql://`: the userinfo runs to the first `@` (wherever it
//!   is: a password may hold `/`, `?` or `#` unescaped), the password after its first `:`; the
//!   parameters start at the first `?` after it, each key (percent-decoded) running to `=` and
//!   each value to the next `&`.
//! - `key=value` form: whitespace-separated `key = value` pairs, spaces allowed around `=`, a
//!   value either bare (to the next whitespace) or in single quotes, `\` escaping the next
//!   character in both.
//!
//! Invariant: every span this module gives is on a `char` boundary of the string it read.

use std::ops::Range;

/// One `key=value` parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Param {
    /// The key, percent-decoded (URL form) or as written.
    pub(crate) key: String,
    /// The value, decoded (URL form) or unescaped and unquoted.
    pub(crate) value: String,
    /// From the key's first byte to the value's last (the text to keep or drop).
    pub(crate) whole: Range<usize>,
    /// The value as written, quotes included.
    pub(crate) raw_value: Range<usize>,
}

/// A connection string's parts.
#[derive(Debug, Default)]
pub(crate) struct Conninfo {
    /// Where the query starts (its `?`), for the URL form; the parameters follow it.
    pub(crate) query_at: Option<usize>,
    /// The password of a URL's userinfo, as far as it may run (see [`read`]).
    pub(crate) userinfo_password: Option<Range<usize>>,
    pub(crate) params: Vec<Param>,
    /// Where the driver stops understanding the string (a key without `=`, or without a value);
    /// everything from here is its error.
    pub(crate) unparsed: Option<usize>,
}

/// Whether `s` is in URL form (a scheme, then `://`; the driver takes `postgres` and
/// `postgresql`, but any scheme is read as a URL here so that a misspelt one is masked too).
fn url_rest_at(s: &str) -> Option<usize> {
    let end = s.find("://")?;
    s[..end]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        .then_some(end + 3)
}

/// Read `s` (see the module docs). For a URL's userinfo password the span runs to the last `@`
/// before the host part, past the driver's first `@`, so that a password holding an unescaped
/// `@` is masked whole.
pub(crate) fn read(s: &str) -> Conninfo {
    match url_rest_at(s) {
        Some(rest) => read_url(s, rest),
        None => read_key_values(s),
    }
}

fn read_url(s: &str, rest: usize) -> Conninfo {
    let mut info = Conninfo::default();
    let first_at = s[rest..].find('@').map(|i| rest + i);
    let host_from = first_at.map_or(rest, |at| at + 1);
    if let Some(first_at) = first_at {
        let authority_end = s[host_from..]
            .find(['/', '?'])
            .map_or(s.len(), |i| host_from + i);
        let userinfo_end = s[host_from..authority_end]
            .rfind('@')
            .map_or(first_at, |i| host_from + i);
        if let Some(colon) = s[rest..first_at].find(':') {
            info.userinfo_password = Some(rest + colon + 1..userinfo_end);
        }
    }
    let Some(query) = s[host_from..].find('?').map(|i| host_from + i) else {
        return info;
    };
    info.query_at = Some(query);
    let mut at = query + 1;
    while at < s.len() {
        let Some(eq) = s[at..].find('=').map(|i| at + i) else {
            info.unparsed = Some(at);
            break;
        };
        let end = s[eq + 1..].find('&').map_or(s.len(), |i| eq + 1 + i);
        info.params.push(Param {
            key: percent_decode(&s[at..eq]),
            value: percent_decode(&s[eq + 1..end]),
            whole: at..end,
            raw_value: eq + 1..end,
        });
        at = end + 1;
    }
    info
}

fn read_key_values(s: &str) -> Conninfo {
    let mut info = Conninfo::default();
    let mut chars = s.char_indices().peekable();
    let skip_ws = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
    };
    loop {
        skip_ws(&mut chars);
        let Some(&(key_start, _)) = chars.peek() else {
            break;
        };
        let mut key_end = s.len();
        while let Some(&(i, c)) = chars.peek() {
            if c.is_whitespace() || c == '=' {
                key_end = i;
                break;
            }
            chars.next();
        }
        if key_end == key_start {
            // `=` with no key before it.
            info.unparsed = Some(key_start);
            break;
        }
        skip_ws(&mut chars);
        if chars.next_if(|&(_, c)| c == '=').is_none() {
            info.unparsed = Some(key_start);
            break;
        }
        skip_ws(&mut chars);
        let Some(&(value_start, first)) = chars.peek() else {
            info.unparsed = Some(key_start);
            break;
        };
        let quoted = first == '\'';
        if quoted {
            chars.next();
        }
        let mut value = String::new();
        let mut value_end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' if quoted => {
                    value_end = Some(i + 1);
                    break;
                }
                c if !quoted && c.is_whitespace() => {
                    value_end = Some(i);
                    break;
                }
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                c => value.push(c),
            }
        }
        // Else the string's end; after an unterminated quote the driver refuses the string, and
        // the value is taken to run to the end.
        let value_end = value_end.unwrap_or(s.len());
        info.params.push(Param {
            key: s[key_start..key_end].to_owned(),
            value,
            whole: key_start..value_end,
            raw_value: value_start..value_end,
        });
    }
    info
}

/// `%XX` escapes decoded (a URL parameter's key or value).
fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::read;

    #[test]
    fn a_url_is_read_as_the_driver_reads_it() {
        let s = "postgres://u:p/w?x@h1:1,h2:2/db?a=1&pass%77ord=s&b";
        let info = read(s);
        assert_eq!(
            &s[info.userinfo_password.clone().expect("a password")],
            "p/w?x"
        );
        assert_eq!(&s[info.query_at.expect("a query")..], "?a=1&pass%77ord=s&b");
        let keys: Vec<_> = info.params.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["a", "password"]);
        assert_eq!(&s[info.params[1].whole.clone()], "pass%77ord=s");
        assert_eq!(&s[info.unparsed.expect("a key without =")..], "b");
    }

    #[test]
    fn key_values_are_read_as_the_driver_reads_them() {
        let s = r"host=h  password = 'a b\'c\\' sslmode= require user=x\ y";
        let info = read(s);
        let pairs: Vec<_> = info
            .params
            .iter()
            .map(|p| (p.key.as_str(), p.value.as_str(), &s[p.raw_value.clone()]))
            .collect();
        assert_eq!(
            pairs,
            [
                ("host", "h", "h"),
                ("password", r"a b'c\", r"'a b\'c\\'"),
                ("sslmode", "require", "require"),
                ("user", "x y", r"x\ y"),
            ]
        );
        assert_eq!(info.unparsed, None);
        assert_eq!(read("host=h password").unparsed, Some(7));
        let open = read("host=h password='op en");
        assert_eq!(
            open.params[1].raw_value,
            16..22,
            "an unterminated quote runs to the end"
        );
    }
}
