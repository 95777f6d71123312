//! What node runs before its program, read from its command line, `NODE_OPTIONS` and the
//! files of `--env-file`: the files it preloads (`-r FILE`, `--require FILE`, `--import FILE`)
//! run in node's process and read node's arguments as their own, so the exec supervisor
//! decides each as the program it is (`node -r .../npm-cli.js ./empty.js publish` publishes).
//!
//! Every reading is an over-approximation where node's own is not certain: every word after a
//! preload option anywhere on the command line (a value of another option, `--title x`, does
//! not hide one after it; a preload word among the program's own arguments is decided too,
//! which can only add a decision), `NODE_OPTIONS` split as node splits it and on whitespace,
//! and every `NODE_OPTIONS` an environment file sets (found by a sixth red-team pass on
//! 2026-12-07, which hid `-r` behind `--title x`, in quotes, and in an `--env-file`).

/// Whether `argv` is an exec of node, by the name it is called.
pub fn is_node(argv: &[String]) -> bool {
    argv.first()
        .is_some_and(|a| matches!(basename(a), "node" | "nodejs"))
}

/// For an exec of node, the files it may preload before its program: after `-r`,
/// `--require`, `--import` (or with `=`) anywhere on its command line and in each of
/// `node_options` (the values of `NODE_OPTIONS` node may see).
pub fn node_preloads(argv: &[String], node_options: &[String]) -> Vec<String> {
    if !is_node(argv) {
        return Vec::new();
    }
    let mut out = Vec::new();
    preloads_in(&argv[1..], &mut out);
    for options in node_options {
        preloads_in(&node_options_words(options), &mut out);
        let plain: Vec<String> = options.split_whitespace().map(str::to_owned).collect();
        preloads_in(&plain, &mut out);
    }
    out.dedup();
    out
}

/// For an exec of node, the files `--env-file` and `--env-file-if-exists` name, anywhere on
/// its command line.
pub fn node_env_files(argv: &[String]) -> Vec<String> {
    if !is_node(argv) {
        return Vec::new();
    }
    values_of(&argv[1..], &["--env-file", "--env-file-if-exists"])
}

/// Every value an environment file (node's `--env-file` format, dotenv's) may give `key`: for
/// each line setting it (`KEY=VALUE`, `export KEY=VALUE`), the value unquoted (a quoted one
/// may span lines), and as it stands up to the end of the line.
pub fn dotenv_values(text: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = &text[start..end];
        start = end + 1;
        let trimmed = line.trim_start();
        let trimmed = trimmed
            .strip_prefix("export ")
            .unwrap_or(trimmed)
            .trim_start();
        let Some(value) = trimmed
            .strip_prefix(key)
            .map(str::trim_start)
            .and_then(|v| v.strip_prefix('='))
            .map(str::trim_start)
        else {
            continue;
        };
        out.push(value.trim_end().to_owned());
        if let Some((before, _)) = value.split_once(" #") {
            out.push(before.trim_end().to_owned());
        }
        // A quoted value may end on a later line (`value` is the end of `line`).
        if let Some(quote) = value
            .chars()
            .next()
            .filter(|c| matches!(c, '"' | '\'' | '`'))
        {
            let inside = &text[end - value.len() + 1..];
            if let Some(close) = inside.find(quote) {
                out.push(inside[..close].to_owned());
            }
        }
    }
    out
}

/// `NODE_OPTIONS` split as node splits it: on spaces, double quotes grouping (a backslash
/// escaping the next character inside them); single quotes are characters like any other.
fn node_options_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => word.extend(chars.next()),
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn preloads_in(words: &[String], out: &mut Vec<String>) {
    out.extend(values_of(words, &["-r", "--require", "--import"]));
}

/// The values of the options `names` among `words`: the next word, or after `=`.
fn values_of(words: &[String], names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (at, word) in words.iter().enumerate() {
        if names.contains(&word.as_str()) {
            out.extend(words.get(at + 1).cloned());
        } else if let Some((name, value)) = word.split_once('=')
            && names.contains(&name)
        {
            out.push(value.to_owned());
        }
    }
    out
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn node_preloads_are_found_on_its_command_line_and_in_node_options() {
        assert_eq!(
            node_preloads(
                &argv("node -r a.js --require=b.js --import c.mjs x.js -r d.js"),
                &[]
            ),
            ["a.js", "b.js", "c.mjs", "d.js"]
        );
        assert_eq!(
            node_preloads(
                &argv("/usr/bin/node x.js"),
                &["--require e.js --max-old-space-size=9".into()]
            ),
            ["e.js"]
        );
        assert!(node_preloads(&argv("python3 -r a.js"), &["--require e.js".into()]).is_empty());
    }

    #[test]
    fn a_preload_behind_an_option_value_or_in_quotes_is_found() {
        assert_eq!(
            node_preloads(&argv("node --title x -r /n/npm-cli.js ./e.js publish"), &[]),
            ["/n/npm-cli.js"]
        );
        assert_eq!(
            node_preloads(
                &argv("node ./e.js"),
                &["--title x --require \"/a b/npm-cli.js\"".into()]
            ),
            ["/a b/npm-cli.js", "\"/a"]
        );
    }

    #[test]
    fn env_files_are_named_both_ways_and_their_node_options_read() {
        assert_eq!(
            node_env_files(&argv("node --env-file=.env --env-file-if-exists x app.js")),
            [".env", "x"]
        );
        let text = "# comment\nFOO=1\nexport NODE_OPTIONS=\"--require /n/npm-cli.js\"\n\
                    NODE_OPTIONS = '--import\n/m.mjs' # later\nNODE_OPTIONSX=no\n";
        let got = dotenv_values(text, "NODE_OPTIONS");
        assert!(
            got.contains(&"--require /n/npm-cli.js".to_owned()),
            "{got:?}"
        );
        assert!(got.contains(&"--import\n/m.mjs".to_owned()), "{got:?}");
        assert!(!got.iter().any(|v| v.contains("no")), "{got:?}");
    }
}
