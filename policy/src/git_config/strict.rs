//! A git config reader that follows git's own grammar (`config.c`), for deciding what a config
//! makes git do. Unlike [`super::entries`], which only looks for paths and may skip what it does
//! not understand, this one reads every entry git would read or fails: a text it cannot read
//! with certainty is an error, which callers treat as dangerous.
//!
//! What it follows: a UTF-8 byte order mark at the start; `\r\n` as a line end; `#` and `;`
//! comments; `[section]`, `[section "subsection"]` (the subsection kept as written, `\` escaping
//! the next character) and the legacy `[section.subsection]` (lower-cased as git does); entries
//! on the same line as their header; `key` alone (a boolean `true`, value `None`); values with
//! double quotes, the escapes `\n`, `\t`, `\b`, `\\`, `\"`, and `\` at the end of a line joining
//! the next one. Anything else git would reject (a key before any section, a key not starting
//! with a letter, an unknown escape, an unterminated quote or header, a NUL byte) is an error.

/// One entry as git reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictEntry {
    /// Section name, lower case.
    pub section: String,
    /// Subsection: as written for `[s "sub"]`, lower case for `[s.sub]`.
    pub subsection: Option<String>,
    /// Key name, lower case.
    pub key: String,
    /// The value; `None` for a key without `=` (git reads it as boolean true).
    pub value: Option<String>,
    /// The 1-based line the entry starts on.
    pub line: usize,
}

impl StrictEntry {
    /// The entry's name as `git config` shows it: `section.subsection.key`.
    pub fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// Why a config text could not be read with certainty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSyntax {
    /// The 1-based line.
    pub line: usize,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for ConfigSyntax {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl Reader<'_> {
    /// The next character, with `\r\n` read as `\n`; `None` at the end.
    fn next(&mut self) -> Option<u8> {
        let c = *self.bytes.get(self.at)?;
        self.at += 1;
        if c == b'\r' && self.bytes.get(self.at) == Some(&b'\n') {
            self.at += 1;
            self.line += 1;
            return Some(b'\n');
        }
        if c == b'\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn peek(&self) -> Option<u8> {
        match self.bytes.get(self.at) {
            Some(b'\r') if self.bytes.get(self.at + 1) == Some(&b'\n') => Some(b'\n'),
            other => other.copied(),
        }
    }

    fn error(&self, what: impl Into<String>) -> ConfigSyntax {
        ConfigSyntax {
            line: self.line,
            what: what.into(),
        }
    }

    /// Skips to just past the end of the line.
    fn skip_line(&mut self) {
        while let Some(c) = self.next() {
            if c == b'\n' {
                break;
            }
        }
    }
}

/// Reads every entry of a config text the way git does, or says why it cannot.
pub fn parse_strict(text: &[u8]) -> Result<Vec<StrictEntry>, ConfigSyntax> {
    let body = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    if body.contains(&0) {
        return Err(ConfigSyntax {
            line: 1,
            what: "a NUL byte".into(),
        });
    }
    let mut r = Reader {
        bytes: body,
        at: 0,
        line: 1,
    };
    let mut section: Option<(String, Option<String>)> = None;
    let mut out = Vec::new();
    while let Some(c) = r.peek() {
        match c {
            b'\n' | b' ' | b'\t' | b'\r' => {
                r.next();
            }
            b'#' | b';' => r.skip_line(),
            b'[' => {
                r.next();
                section = Some(header(&mut r)?);
            }
            c if c.is_ascii_alphabetic() => {
                let Some((name, sub)) = &section else {
                    return Err(r.error("an entry before any section"));
                };
                let line = r.line;
                let (key, value) = key_value(&mut r)?;
                out.push(StrictEntry {
                    section: name.clone(),
                    subsection: sub.clone(),
                    key,
                    value,
                    line,
                });
            }
            other => {
                return Err(r.error(format!("unexpected character {:?}", char::from(other))));
            }
        }
    }
    Ok(out)
}

/// A section header after its `[`: the section name (lower case) and subsection.
fn header(r: &mut Reader<'_>) -> Result<(String, Option<String>), ConfigSyntax> {
    let mut name = Vec::new();
    loop {
        match r.next() {
            Some(b']') => break,
            Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'.' => {
                name.push(c.to_ascii_lowercase());
            }
            Some(b' ' | b'\t' | b'\r') => {
                let sub = quoted_subsection(r)?;
                return Ok((text(r, name, "section name")?, Some(sub)));
            }
            _ => return Err(r.error("a malformed section header")),
        }
    }
    let name = text(r, name, "section name")?;
    match name.split_once('.') {
        Some((section, sub)) if !section.is_empty() => {
            Ok((section.to_owned(), Some(sub.to_owned())))
        }
        Some(_) => Err(r.error("a malformed section header")),
        None if name.is_empty() => Err(r.error("an empty section name")),
        None => Ok((name, None)),
    }
}

/// `"subsection"]`, after the blank that follows a section name.
fn quoted_subsection(r: &mut Reader<'_>) -> Result<String, ConfigSyntax> {
    while matches!(r.peek(), Some(b' ' | b'\t' | b'\r')) {
        r.next();
    }
    if r.next() != Some(b'"') {
        return Err(r.error("a malformed section header"));
    }
    let mut sub = Vec::new();
    loop {
        match r.next() {
            Some(b'"') => break,
            Some(b'\\') => match r.next() {
                Some(b'\n') | None => return Err(r.error("a malformed section header")),
                Some(c) => sub.push(c),
            },
            Some(b'\n') | None => return Err(r.error("an unterminated section header")),
            Some(c) => sub.push(c),
        }
    }
    if r.next() != Some(b']') {
        return Err(r.error("a malformed section header"));
    }
    text(r, sub, "subsection")
}

fn text(r: &Reader<'_>, bytes: Vec<u8>, what: &str) -> Result<String, ConfigSyntax> {
    String::from_utf8(bytes).map_err(|_| r.error(format!("a {what} that is not UTF-8")))
}

/// `key`, `key = value` or `key=value`, to the end of the line.
fn key_value(r: &mut Reader<'_>) -> Result<(String, Option<String>), ConfigSyntax> {
    let mut key = String::new();
    while let Some(c) = r.peek() {
        if c.is_ascii_alphanumeric() || c == b'-' {
            key.push(char::from(c.to_ascii_lowercase()));
            r.next();
        } else {
            break;
        }
    }
    while matches!(r.peek(), Some(b' ' | b'\t')) {
        r.next();
    }
    match r.peek() {
        None => Ok((key, None)),
        Some(b'\n') => {
            r.next();
            Ok((key, None))
        }
        Some(b'=') => {
            r.next();
            Ok((key, Some(value(r)?)))
        }
        Some(_) => Err(r.error(format!("a malformed entry `{key}`"))),
    }
}

/// A value after its `=`, to the end of its (possibly continued) line.
fn value(r: &mut Reader<'_>) -> Result<String, ConfigSyntax> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut comment = false;
    // Blanks outside quotes: dropped before and after the value, kept as they are between
    // other characters.
    let mut blanks = Vec::new();
    loop {
        let Some(c) = r.next() else {
            if quoted {
                return Err(r.error("an unterminated quote"));
            }
            break;
        };
        if c == b'\n' {
            if quoted {
                return Err(r.error("an unterminated quote"));
            }
            break;
        }
        if comment {
            continue;
        }
        if !quoted && (c == b' ' || c == b'\t') {
            if !out.is_empty() {
                blanks.push(c);
            }
            continue;
        }
        if !quoted && (c == b'#' || c == b';') {
            comment = true;
            continue;
        }
        out.append(&mut blanks);
        match c {
            b'\\' => match r.next() {
                Some(b'\n') => {}
                Some(b't') => out.push(b'\t'),
                Some(b'b') => out.push(b'\x08'),
                Some(b'n') => out.push(b'\n'),
                Some(b'\\') => out.push(b'\\'),
                Some(b'"') => out.push(b'"'),
                _ => return Err(r.error("an unknown escape in a value")),
            },
            b'"' => quoted = !quoted,
            c => out.push(c),
        }
    }
    String::from_utf8(out).map_err(|_| r.error("a value that is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn names(text: &str) -> Vec<(String, Option<String>)> {
        parse_strict(text.as_bytes())
            .unwrap()
            .into_iter()
            .map(|e| (e.name(), e.value))
            .collect()
    }

    #[test]
    fn entries_are_read_as_git_reads_them() {
        let text = "\u{feff}[Core]\r\n\tBare = false\n\tfsmonitor\n# c\n[alias \"Sub \\\"x\\\"\"] st = status ; c\n[filter.LFS]clean=\"a;b\" # c\n[x]\n\tk = one \\\n two\n\tq = \" pad \"  \n";
        assert_eq!(
            names(text),
            vec![
                ("core.bare".into(), Some("false".into())),
                ("core.fsmonitor".into(), None),
                ("alias.Sub \"x\".st".into(), Some("status".into())),
                ("filter.lfs.clean".into(), Some("a;b".into())),
                ("x.k".into(), Some("one  two".into())),
                ("x.q".into(), Some(" pad ".into())),
            ]
        );
    }

    #[test]
    fn what_git_rejects_is_an_error() {
        for bad in [
            "k = v\n",
            "[core\n",
            "[core \"x]\n",
            "[core]\n\t1k = v\n",
            "[core]\n\tk = \"open\n",
            "[core]\n\tk = a\\qb\n",
            "[core]\n\tk v\n",
            "[core]\n\tk # comment\n",
            "[core]\n\tk = \0\n",
            "[]\n",
            "[.x]\n",
        ] {
            assert!(parse_strict(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_continued_line_hides_no_entry() {
        // git reads this as one value of `a`, not as an entry `fsmonitor`.
        let entries = parse_strict(b"[core]\n\ta = x \\\n\tfsmonitor = y\n").unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].key, "a");
    }
}
