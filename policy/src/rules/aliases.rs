//! Aliases a program expands in its own process: git's (`-c alias.NAME=VALUE` on the command
//! line and the config files the exec supervisor read) and cargo's (`--config alias.NAME=...`,
//! its config files and `CARGO_ALIAS_*`). Every definition of a name is a candidate, so a
//! program's precedence needs no modelling: the strictest decision wins.

use crate::cargo_config;
use crate::shell::{Stdin, Word};

use super::split_words;
use super::views::Explorer;

/// Single quotes `s` for a shell.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Explorer {
    /// `git -c alias.NAME=VALUE NAME ...`: what the alias runs.
    pub(super) fn git_alias(
        &mut self,
        options: &[Word],
        view: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let mut definitions = Vec::new();
        for (i, w) in options.iter().enumerate() {
            let Some(w) = w.as_literal() else { continue };
            let glued = w
                .strip_prefix("-c")
                .filter(|v| !v.is_empty() && !w.starts_with("--"))
                .map(Word::literal);
            let value = if w == "-c" {
                options.get(i + 1)
            } else if glued.is_some() {
                glued.as_ref()
            } else if w.starts_with("--config-env") {
                if w.contains("alias.")
                    || options
                        .get(i + 1)
                        .and_then(Word::as_literal)
                        .is_some_and(|v| v.starts_with("alias."))
                {
                    self.hidden(format!("the git alias `{w}` takes from the environment"));
                }
                continue;
            } else {
                continue;
            };
            match value {
                Some(Word::Literal(v)) => {
                    if let Some((key, body)) = v.split_once('=')
                        && let Some(name) = key.strip_prefix("alias.")
                    {
                        definitions.push((name.to_owned(), body.to_owned()));
                    }
                }
                // `-c "core.pager=$p"` defines no alias.
                Some(Word::Hidden(h))
                    if "alias.".starts_with(h.prefix.as_str())
                        || h.prefix.starts_with("alias.") =>
                {
                    self.hidden(format!(
                        "{} given to `git -c` (it may define an alias)",
                        h.what
                    ));
                }
                Some(Word::Hidden(_)) | None => {}
            }
        }
        let Some(Word::Literal(sub)) = view.get(1) else {
            return;
        };
        // The last `-c` definition on the line, and every one from config files.
        let mut bodies: Vec<String> = definitions
            .iter()
            .rev()
            .find(|(n, _)| n == sub)
            .map(|(_, body)| body.clone())
            .into_iter()
            .collect();
        bodies.extend(
            self.config_aliases
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(sub))
                .map(|(_, body)| body.clone()),
        );
        for body in bodies {
            self.expand_git_alias(sub, &body, view, stdin, depth);
        }
    }

    /// What `git SUB ARGS...` runs when `SUB` is an alias for `body`.
    fn expand_git_alias(
        &mut self,
        sub: &str,
        body: &str,
        view: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let args = &view[2..];
        if let Some(command) = body.strip_prefix('!') {
            let mut script = command.to_owned();
            for a in args {
                script.push(' ');
                match a {
                    Word::Literal(s) => script.push_str(&quote(s)),
                    Word::Hidden(_) => script.push_str("\"${HIDDEN_ARGUMENT}\""),
                }
            }
            self.scripts.push(script);
        } else {
            match split_words(body) {
                Ok(expanded) => {
                    let mut again = vec![view[0].clone()];
                    again.extend(expanded.into_iter().map(Word::Literal));
                    again.extend(args.iter().cloned());
                    self.explore(again, stdin, depth + 1);
                }
                Err(_) => self.hidden(format!("what the git alias `{sub}` runs")),
            }
        }
    }

    /// `cargo --config alias.NAME=... NAME ...` or an alias from cargo's config: what it runs.
    /// cargo ignores an alias named like a builtin command; it is decided all the same, which
    /// costs nothing but a denial of what cargo would have warned about.
    pub(super) fn cargo_alias(
        &mut self,
        options: &[Word],
        view: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let mut definitions = Vec::new();
        for (i, w) in options.iter().enumerate() {
            let value = match w.as_literal() {
                Some("--config") => options.get(i + 1),
                _ => continue,
            };
            match value {
                Some(Word::Literal(v)) => {
                    definitions.extend(cargo_config::inline(v).unwrap_or_default());
                }
                Some(Word::Hidden(h))
                    if "alias".starts_with(h.prefix.as_str()) || h.prefix.starts_with("alias") =>
                {
                    self.hidden(format!(
                        "{} given to `cargo --config` (it may define an alias)",
                        h.what
                    ));
                }
                Some(Word::Hidden(_)) | None => {}
            }
        }
        for w in options {
            match w {
                Word::Literal(w) => {
                    if let Some(v) = w.strip_prefix("--config=") {
                        definitions.extend(cargo_config::inline(v).unwrap_or_default());
                    }
                }
                Word::Hidden(h) if h.prefix.starts_with("--config=") => {
                    self.hidden(format!(
                        "{} given to `cargo --config=` (it may define an alias)",
                        h.what
                    ));
                }
                Word::Hidden(_) => {}
            }
        }
        let Some(Word::Literal(sub)) = view.get(1) else {
            return;
        };
        let in_env = cargo_config::env_name(sub);
        let bodies: Vec<Vec<String>> = definitions
            .iter()
            .chain(self.cargo_aliases.iter())
            .filter(|(name, _)| name == sub || *name == in_env)
            .map(|(_, body)| body.clone())
            .collect();
        for body in bodies {
            // The options stay: an alias may name another defined by them.
            let mut again = vec![view[0].clone()];
            again.extend(options.iter().cloned());
            again.extend(body.into_iter().map(Word::Literal));
            again.extend(view[2..].iter().cloned());
            self.explore(again, stdin, depth + 1);
        }
    }
}
