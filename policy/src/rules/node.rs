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
    use super::basename;
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

/// Every value an environment file (node's `--env-file` format, dotenv's) may give `key`, read
/// as loosely as any node reads one (node 20.6 to 20.11 took `KEY: value`, a tab after
/// `export`, a key anywhere in a line, any whitespace around the separator, a carriage return
/// as a line break; node now drops carriage returns and expands `\n` in double quotes):
/// after each `key` followed by `=` or `:`, the rest of the line (or of the next with a value),
/// that up to a `#`, and a quoted value (which may span lines), with `\n` expanded too.
/// `None` when the readings would pass [`MAX_DOTENV_BYTES`] (a file written to hold the key
/// many times over on one line): what it sets is then unknown.
pub fn dotenv_values(text: &str, key: &str) -> Option<Vec<String>> {
    let space = |c: char| c.is_ascii_whitespace() || c == '\x0b';
    let mut out: Vec<String> = Vec::new();
    let mut bytes = 0;
    // A carriage return dropped (node now), or a line break (node 20.6 to 20.11).
    for text in [text.replace('\r', ""), text.replace('\r', "\n")] {
        for (at, _) in text.match_indices(key) {
            let after = text[at + key.len()..].trim_start_matches(space);
            let Some(value) = after.strip_prefix(['=', ':']) else {
                continue;
            };
            // On the same line, or (any whitespace skipped) on a later one.
            for value in [
                value.trim_start_matches([' ', '\t']),
                value.trim_start_matches(space),
            ] {
                let line = value.split('\n').next().unwrap_or_default();
                bytes += 4 * line.len() + value.len().min(MAX_DOTENV_BYTES);
                if bytes > MAX_DOTENV_BYTES {
                    return None;
                }
                out.push(line.trim_end().to_owned());
                if let Some((before, _)) = line.split_once('#') {
                    out.push(before.trim_end().to_owned());
                }
                if let Some(quote) = value
                    .chars()
                    .next()
                    .filter(|c| matches!(c, '"' | '\'' | '`'))
                {
                    let inside = &value[1..];
                    if let Some(close) = inside.find(quote) {
                        out.push(inside[..close].to_owned());
                        // node expands `\n` in a double-quoted value.
                        out.push(inside[..close].replace("\\n", "\n"));
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Some(out)
}

/// The most bytes of readings [`dotenv_values`] gives for one file.
pub const MAX_DOTENV_BYTES: usize = 8 << 20;

/// The files a preload's value may name: as written, and read as the URL an `--import`
/// specifier is (`file:` URLs, a relative or absolute path likewise: `?` and `#` end it,
/// `%XX` is a byte).
pub fn node_specifiers(value: &str) -> Vec<String> {
    let mut out = vec![value.to_owned()];
    // As a URL parser reads it: spaces and controls around it dropped, tabs and line breaks
    // in it dropped, the scheme in any case, `\` a `/`.
    let cleaned: String = value
        .trim_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .map(|c| if c == '\\' { '/' } else { c })
        .collect();
    let scheme = cleaned.get(..5).filter(|s| s.eq_ignore_ascii_case("file:"));
    let relative;
    let path = match scheme {
        Some(_) => {
            let rest = &cleaned[5..];
            match rest.strip_prefix("//") {
                // The host: `localhost` in any case or encoding is this machine (another
                // fails in node); the path starts at the next `/`.
                Some(host_and_path) => host_and_path
                    .find('/')
                    .map_or(host_and_path, |at| &host_and_path[at..]),
                None if rest.starts_with('/') => rest,
                // `file:bin/x.js` is relative to the working directory.
                None => {
                    relative = format!("./{rest}");
                    &relative
                }
            }
        }
        None => &cleaned,
    };
    let path = path.find(['?', '#']).map_or(path, |end| &path[..end]);
    if let Some(decoded) = percent_decoded(path)
        && !out.contains(&decoded)
    {
        out.push(decoded);
    }
    out
}

/// Whether node reads a preload's value as a path (`/...`, `./...`, `../...`), not a name
/// it looks up in `node_modules`.
pub fn is_node_path(value: &str) -> bool {
    value.starts_with('/')
        || value.starts_with("./")
        || value.starts_with("../")
        || value == "."
        || value == ".."
}

/// `text` with each `%XX` the byte it stands for; `None` when the result is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|_| bytes[at] == b'%')
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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
    // A loader ran on node's main thread, with its arguments, before node 20.6.
    out.extend(values_of(
        words,
        &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            // A test reporter is loaded into node's process with its arguments.
            "--test-reporter",
        ],
    ));
}

/// For an exec of node, an option on its command line or in `node_options` that makes it
/// read preloads from a file of settings this reading does not follow (node 22.16's
/// `--experimental-config-file`, `--experimental-default-config-file`): what it preloads is
/// then unknown.
pub fn node_unread_option(argv: &[String], node_options: &[String]) -> Option<String> {
    const UNREAD: [&str; 2] = [
        "--experimental-config-file",
        "--experimental-default-config-file",
    ];
    if !is_node(argv) {
        return None;
    }
    let from_env = node_options.iter().flat_map(|o| node_options_words(o));
    argv[1..].iter().cloned().chain(from_env).find(|word| {
        let name = word.split('=').next().unwrap_or_default().replace('_', "-");
        UNREAD.contains(&name.as_str())
    })
}

/// The values of the options `names` among `words`: the next word, or after `=`. node takes
/// `_` for `-` in an option's name (`--experimental_loader`).
fn values_of(words: &[String], names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word.as_str(), None),
        };
        let name = if name.starts_with("--") {
            name.replace('_', "-")
        } else {
            name.to_owned()
        };
        if !names.contains(&name.as_str()) {
            continue;
        }
        match value {
            Some(value) => out.push(value.to_owned()),
            None => out.extend(words.get(at + 1).cloned()),
        }
    }
    out
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
    fn a_loader_is_a_preload_and_a_settings_file_leaves_them_unknown() {
        assert_eq!(
            node_preloads(&argv("node --experimental-loader /n/npm-cli.js e.js"), &[]),
            ["/n/npm-cli.js"]
        );
        // node reads `_` as `-` in an option's name; a test reporter is loaded too.
        assert_eq!(
            node_preloads(
                &argv("node --experimental_loader /n/a.js --test-reporter=/n/b.js"),
                &[]
            ),
            ["/n/a.js", "/n/b.js"]
        );
        assert!(
            node_unread_option(&argv("node --experimental-default-config-file e.js"), &[])
                .is_some()
        );
        assert!(
            node_unread_option(
                &argv("node e.js"),
                &["--experimental-config-file=c.json".into()]
            )
            .is_some()
        );
        assert_eq!(node_unread_option(&argv("node --title x e.js"), &[]), None);
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
    fn an_import_url_names_the_file_it_decodes_to() {
        // A seventh red-team pass: `--import file:///.../npm-cli.js`, `npm%2dcli.js`,
        // `npm-cli.js?x` and `#x` all load npm-cli.js.
        for value in [
            "file:///n/npm-cli.js",
            "file://localhost/n/npm-cli.js",
            "file:/n/npm-cli.js",
            "/n/npm%2dcli.js",
            "/n/npm-cli.js?x",
            "/n/npm-cli.js#x",
            "FILE:///n/npm-cli.js",
            "file://LOCALHOST/n/npm-cli.js",
            "file://localhos%74/n/npm-cli.js",
            " /n/npm-cli.js",
            "/n/npm-\tcli.js",
            "\\n\\npm-cli.js",
        ] {
            assert!(
                node_specifiers(value).contains(&"/n/npm-cli.js".to_owned()),
                "{value}: {:?}",
                node_specifiers(value)
            );
        }
        assert_eq!(node_specifiers("./a.js"), ["./a.js"]);
        assert!(node_specifiers("file:bin/a.js").contains(&"./bin/a.js".to_owned()));
        assert!(is_node_path("./a") && is_node_path("/a") && is_node_path(".."));
        assert!(!is_node_path("npm-cli") && !is_node_path("npm/bin/npm-cli.js"));
    }

    #[test]
    fn env_files_are_named_both_ways_and_their_node_options_read() {
        assert_eq!(
            node_env_files(&argv("node --env-file=.env --env-file-if-exists x app.js")),
            [".env", "x"]
        );
        let text = "# comment\nFOO=1\nexport NODE_OPTIONS=\"--require /n/npm-cli.js\"\n\
                    NODE_OPTIONS = '--import\n/m.mjs' # later\nNODE_OPTIONSX=no\n";
        let got = dotenv_values(text, "NODE_OPTIONS").unwrap();
        assert!(
            got.contains(&"--require /n/npm-cli.js".to_owned()),
            "{got:?}"
        );
        assert!(got.contains(&"--import\n/m.mjs".to_owned()), "{got:?}");
        assert!(!got.iter().any(|v| v.contains("no")), "{got:?}");
        // Carriage returns anywhere, and a comment right after the value (a seventh red-team
        // pass: node reads both as `--require /n/npm-cli.js`).
        let got = dotenv_values(
            "NODE_\rOPTIONS=--requ\rire /n/npm-\rcli.js#x\r\n",
            "NODE_OPTIONS",
        )
        .unwrap();
        assert!(
            got.contains(&"--require /n/npm-cli.js".to_owned()),
            "{got:?}"
        );
        // The older parser's forms (review, 2026-12-07).
        for text in [
            "NODE_OPTIONS: --require /n/npm-cli.js\n",
            "export\tNODE_OPTIONS=--require /n/npm-cli.js\n",
            "# NODE_OPTIONS=--require /n/npm-cli.js\n",
        ] {
            let got = dotenv_values(text, "NODE_OPTIONS").unwrap();
            assert!(
                got.contains(&"--require /n/npm-cli.js".to_owned()),
                "{text:?}: {got:?}"
            );
        }
        // A file holding the key over and over is unknown, not read without bound.
        let many = "NODE_OPTIONS=".repeat(100_000);
        assert_eq!(dotenv_values(&many, "NODE_OPTIONS"), None);
        // More of what node reads (a review of the seventh pass's fixes).
        for (text, want) in [
            (
                "NODE_OPTIONS=\"--require=./a\\n.js\"\n",
                "--require=./a\n.js",
            ),
            (
                "NODE_OPTIONS\n= --require /n/npm-cli.js\n",
                "--require /n/npm-cli.js",
            ),
            (
                "NODE_OPTIONS:\n--require /n/npm-cli.js\n",
                "--require /n/npm-cli.js",
            ),
            (
                "NODE_OPTIONS=--require /n/npm-cli.js\rjunk\n",
                "--require /n/npm-cli.js",
            ),
        ] {
            let got = dotenv_values(text, "NODE_OPTIONS").unwrap();
            assert!(got.contains(&want.to_owned()), "{text:?}: {got:?}");
        }
    }
}
