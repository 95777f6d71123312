//! A small, total glob matcher for path rules and environment-name patterns.
//!
//! Syntax: `?` one character other than `/`; `*` any run of characters other than `/`;
//! `**/` zero or more whole path segments; `**` elsewhere any run of characters including `/`;
//! `[abc]`, `[a-z]`, `[!abc]` one character from (or not from) a class; `\x` a literal `x`.
//! Matching is linear in pattern × text (memoised), so hostile input cannot blow up.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyChar,
    Star,
    GlobStarDir,
    AnyDeep,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A compiled glob pattern.
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    tokens: Vec<Token>,
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.source)
    }
}

impl Glob {
    /// Compiles `pattern`, or explains why it is not a valid glob.
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '?' => tokens.push(Token::AnyChar),
                '*' if chars.get(i + 1) == Some(&'*') => {
                    let at_segment_start = i == 0 || chars[i - 1] == '/';
                    if at_segment_start && chars.get(i + 2) == Some(&'/') {
                        tokens.push(Token::GlobStarDir);
                        i += 2;
                    } else {
                        tokens.push(Token::AnyDeep);
                        i += 1;
                    }
                }
                '*' => tokens.push(Token::Star),
                '\\' => {
                    let escaped = chars
                        .get(i + 1)
                        .ok_or_else(|| format!("glob `{pattern}` ends with a lone `\\`"))?;
                    tokens.push(Token::Literal(*escaped));
                    i += 1;
                }
                '[' => {
                    let (token, next) = parse_class(&chars, i)
                        .ok_or_else(|| format!("glob `{pattern}` has an unclosed `[`"))?;
                    tokens.push(token);
                    i = next;
                    continue;
                }
                c => tokens.push(Token::Literal(c)),
            }
            i += 1;
        }
        Ok(Glob {
            source: pattern.to_owned(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `text` matches the whole pattern.
    pub fn is_match(&self, text: &str) -> bool {
        let text: Vec<char> = text.chars().collect();
        let width = text.len() + 1;
        // memo[t * width + s]: 0 unknown, 1 false, 2 true
        let mut memo = vec![0u8; (self.tokens.len() + 1) * width];
        self.match_at(0, 0, &text, &mut memo, width)
    }

    fn match_at(&self, t: usize, s: usize, text: &[char], memo: &mut [u8], width: usize) -> bool {
        let slot = t * width + s;
        match memo[slot] {
            1 => return false,
            2 => return true,
            _ => {}
        }
        let result = match self.tokens.get(t) {
            None => s == text.len(),
            Some(token) => match token {
                Token::Literal(c) => {
                    text.get(s) == Some(c) && self.match_at(t + 1, s + 1, text, memo, width)
                }
                Token::AnyChar => {
                    text.get(s).is_some_and(|c| *c != '/')
                        && self.match_at(t + 1, s + 1, text, memo, width)
                }
                Token::Class { negated, ranges } => {
                    text.get(s).is_some_and(|c| {
                        let inside = ranges.iter().any(|(lo, hi)| lo <= c && c <= hi);
                        *c != '/' && inside != *negated
                    }) && self.match_at(t + 1, s + 1, text, memo, width)
                }
                Token::Star => {
                    let mut end = s;
                    loop {
                        if self.match_at(t + 1, end, text, memo, width) {
                            break true;
                        }
                        if end >= text.len() || text[end] == '/' {
                            break false;
                        }
                        end += 1;
                    }
                }
                Token::AnyDeep => {
                    (s..=text.len()).any(|end| self.match_at(t + 1, end, text, memo, width))
                }
                Token::GlobStarDir => {
                    // Zero segments, or any prefix that ends just after a `/`.
                    self.match_at(t + 1, s, text, memo, width)
                        || (s..text.len()).any(|i| {
                            text[i] == '/' && self.match_at(t + 1, i + 1, text, memo, width)
                        })
                }
            },
        };
        memo[slot] = if result { 2 } else { 1 };
        result
    }
}

fn parse_class(chars: &[char], open: usize) -> Option<(Token, usize)> {
    let mut i = open + 1;
    let negated = matches!(chars.get(i), Some('!') | Some('^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && !first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        first = false;
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|e| *e != ']') {
            let hi = chars[i + 2];
            ranges.push((c.min(hi), c.max(hi)));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Glob::new(p).unwrap().is_match(t)
    }

    #[test]
    fn star_does_not_cross_slash() {
        assert!(m("*.rs", "main.rs"));
        assert!(!m("*.rs", "src/main.rs"));
        assert!(m("src/*.rs", "src/main.rs"));
    }

    #[test]
    fn globstar_matches_zero_or_more_segments() {
        assert!(m("**/.env", ".env"));
        assert!(m("**/.env", "a/b/.env"));
        assert!(!m("**/.env", "a/b/x.env"));
        assert!(m("secrets/**", "secrets/a/b"));
        assert!(m("a/**/z", "a/z"));
        assert!(m("a/**/z", "a/b/c/z"));
    }

    #[test]
    fn classes_and_escapes() {
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("LC_*", "LC_ALL"));
        assert!(m("*_TOKEN", "GITHUB_TOKEN"));
    }

    #[test]
    fn malformed_patterns_are_rejected() {
        assert!(Glob::new("[abc").unwrap_err().contains("unclosed"));
        assert!(Glob::new("abc\\").is_err());
    }

    #[test]
    fn hostile_pattern_finishes_quickly() {
        let p = "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let t = "a".repeat(2000);
        assert!(!m(p, &t));
        assert!(!m("**/**/**/**/**/**/**/x", &"a/".repeat(500)));
    }

    proptest! {
        #[test]
        fn never_panics(p in ".{0,40}", t in ".{0,60}") {
            if let Ok(g) = Glob::new(&p) {
                let _ = g.is_match(&t);
            }
        }

        #[test]
        fn literal_patterns_match_only_themselves(t in "[a-z/._-]{0,30}", u in "[a-z/._-]{0,30}") {
            let g = Glob::new(&t).unwrap();
            prop_assert!(g.is_match(&t));
            prop_assert_eq!(g.is_match(&u), t == u);
        }
    }
}
