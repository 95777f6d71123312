//! Walking the syntax tree: every `command` node anywhere becomes a [`SimpleCommand`].
//!
//! The walk is iterative (an explicit stack), so a deeply nested script cannot overflow the
//! call stack. Two quirks of the bash grammar are undone here: words after a redirection's
//! target (`git >/dev/null push`) are parsed as more targets, and the arguments after a
//! here-document operator (`cat <<EOF arg`) belong to the redirection; both are given back to
//! the command they are arguments of.

use std::collections::HashMap;

use tree_sitter::{Node, Tree};

use super::words::{text, word};
use super::{Hidden, MAX_COMMANDS, Script, SimpleCommand, Stdin, Word, short};

/// Variables whose value bash runs (or expands command substitutions in) later: assigning one
/// stores code the rules do not see run.
pub(super) const CODE_VARIABLES: &[&str] = &[
    "PROMPT_COMMAND",
    "BASH_ENV",
    "ENV",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
];

/// Where known standard input text is in the tree.
#[derive(Debug, Clone, Copy)]
enum Feed<'t> {
    /// A here document's body.
    Body(Node<'t>),
    /// A here string's word.
    Word(Node<'t>),
}

#[derive(Debug, Clone, Copy)]
struct Ctx<'t> {
    stdin: Option<(&'static str, Option<Feed<'t>>)>,
    /// Inside `$((...))` that the grammar read as a command substitution of a subshell (it
    /// does in here-document bodies): its "commands" are arithmetic, not commands.
    arithmetic: bool,
}

pub(super) fn walk(tree: &Tree, src: &str, script: &mut Script) {
    let root = tree.root_node();
    let mut cursor = root.walk();
    script.empty = root
        .named_children(&mut cursor)
        .all(|n| n.kind() == "comment");
    if root.has_error() {
        let at = first_error(root).unwrap_or(root).start_position();
        script.hidden.push(Hidden::new(
            format!(
                "the text near line {}, column {}: it does not parse as bash",
                at.row + 1,
                at.column + 1
            ),
            true,
        ));
    }
    let mut extra: HashMap<usize, Vec<Word>> = HashMap::new();
    let mut stack = vec![(
        root,
        Ctx {
            stdin: None,
            arithmetic: false,
        },
    )];
    let mut too_many = false;
    while let Some((node, ctx)) = stack.pop() {
        let mut ctx = ctx;
        match node.kind() {
            "command_substitution" => {
                let raw = text(node, src);
                let only_subshell = node
                    .named_children(&mut cursor)
                    .map(|c| c.kind())
                    .eq(["subshell"]);
                ctx.arithmetic = raw.starts_with("$((") && raw.ends_with("))") && only_subshell;
            }
            "command" if ctx.arithmetic => {}
            "command" => {
                let extra = extra.remove(&node.id()).unwrap_or_default();
                if script.commands.len() < MAX_COMMANDS {
                    script
                        .commands
                        .push(simple_command(node, src, ctx.stdin, extra));
                } else if !too_many {
                    too_many = true;
                    script.hidden.push(Hidden::new(
                        format!("the commands past the first {MAX_COMMANDS}"),
                        true,
                    ));
                }
            }
            "redirected_statement" => {
                redirected(node, src, ctx, script, &mut extra, &mut stack);
                continue;
            }
            "declaration_command" if declares_a_hidden_name(node, src) => {
                script.hidden.push(Hidden::new(
                    super::hidden_variable_name(&short(text(node, src))),
                    true,
                ));
            }
            "pipeline" => {
                let mut after_pipe = false;
                let first = stack.len();
                for child in node.children(&mut cursor) {
                    if !child.is_named() {
                        after_pipe |= matches!(text(child, src), "|" | "|&");
                        continue;
                    }
                    let stdin = if after_pipe {
                        Some(("a pipe", None))
                    } else {
                        ctx.stdin
                    };
                    stack.push((child, Ctx { stdin, ..ctx }));
                }
                stack[first..].reverse();
                continue;
            }
            "variable_assignment" => {
                if let Some(name) = node.child_by_field_name("name")
                    && CODE_VARIABLES.contains(&text(name, src))
                {
                    script.hidden.push(Hidden::new(
                        format!(
                            "the code stored by `{}`, which bash runs later",
                            short(text(node, src))
                        ),
                        true,
                    ));
                }
            }
            _ => {}
        }
        // Children in source order (the stack is last in, first out); one cursor for all.
        let first = stack.len();
        stack.extend(node.named_children(&mut cursor).map(|c| (c, ctx)));
        stack[first..].reverse();
    }
}

fn first_error(root: Node<'_>) -> Option<Node<'_>> {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            return Some(node);
        }
        if node.has_error() {
            let mut cursor = node.walk();
            let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    None
}

/// Whether a `file_redirect` replaces standard input (`< file`, `0< file`, `<&3`).
fn reads_stdin(redirect: Node<'_>, src: &str) -> bool {
    let descriptor = redirect
        .child_by_field_name("descriptor")
        .map(|d| text(d, src));
    let mut cursor = redirect.walk();
    let input = redirect
        .children(&mut cursor)
        .any(|c| !c.is_named() && matches!(text(c, src), "<" | "<&"));
    input && descriptor.is_none_or(|d| d == "0")
}

/// The destination words of a `file_redirect` after the first: arguments of the command.
fn spilled_arguments(redirect: Node<'_>, src: &str) -> Vec<Word> {
    let mut cursor = redirect.walk();
    redirect
        .children_by_field_name("destination", &mut cursor)
        .skip(1)
        .map(|d| word(d, src))
        .collect()
}

/// A here document's body when bash passes it on as written: the delimiter is quoted, or the
/// body expands nothing.
fn literal_body<'t>(heredoc: Node<'t>, src: &str) -> Option<Feed<'t>> {
    let mut cursor = heredoc.walk();
    let children: Vec<Node<'t>> = heredoc.named_children(&mut cursor).collect();
    let start = children.iter().find(|c| c.kind() == "heredoc_start")?;
    let body = children.iter().find(|c| c.kind() == "heredoc_body")?;
    let quoted = text(*start, src).contains(['\'', '"', '\\']);
    let expands = text(*body, src).contains(['$', '`', '\\']);
    (quoted || !expands).then_some(Feed::Body(*body))
}

fn redirected<'t>(
    node: Node<'t>,
    src: &str,
    ctx: Ctx<'t>,
    script: &mut Script,
    extra: &mut HashMap<usize, Vec<Word>>,
    stack: &mut Vec<(Node<'t>, Ctx<'t>)>,
) {
    let body = node.child_by_field_name("body");
    let mut stdin = ctx.stdin;
    let mut arguments = Vec::new();
    let mut redirects = Vec::new();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        if Some(child) == body {
            continue;
        }
        match child.kind() {
            "file_redirect" => {
                if reads_stdin(child, src) {
                    stdin = Some(("a redirection", None));
                }
                arguments.extend(spilled_arguments(child, src));
            }
            "heredoc_redirect" => {
                stdin = Some(("a here document", literal_body(child, src)));
                let mut c = child.walk();
                arguments.extend(
                    child
                        .children_by_field_name("argument", &mut c)
                        .map(|a| word(a, src)),
                );
            }
            "herestring_redirect" => {
                stdin = Some(("a here string", child.named_child(0).map(Feed::Word)));
            }
            _ => {}
        }
        redirects.push((child, ctx));
    }
    stack.extend(redirects.into_iter().rev());
    if let Some(body) = body {
        if !arguments.is_empty() {
            match last_command(body) {
                Some(command) => extra.entry(command.id()).or_default().extend(arguments),
                None => script.hidden.push(Hidden::new(
                    format!(
                        "the arguments after a redirection in `{}`",
                        short(text(node, src))
                    ),
                    true,
                )),
            }
        }
        stack.push((body, Ctx { stdin, ..ctx }));
    }
}

/// Whether a `declare`/`local`/`export`/... names a variable the text does not show: an
/// argument that is an expansion (`declare "$v[u]=x"`), or any expanded value of a nameref
/// (`declare -n r="$v"`).
fn declares_a_hidden_name(node: Node<'_>, src: &str) -> bool {
    let expands = |n: Node<'_>| {
        let t = text(n, src);
        t.contains('$') || t.contains('`')
    };
    let mut cursor = node.walk();
    let args: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
    let nameref = args.iter().any(|a| {
        let t = text(*a, src);
        a.kind() == "word" && t.starts_with('-') && t.contains('n')
    });
    args.iter().any(|a| match a.kind() {
        "variable_assignment" => nameref && expands(*a),
        "word" | "variable_name" => false,
        _ => expands(*a),
    })
}

/// The simple command that arguments written after a statement's redirection belong to.
fn last_command(mut node: Node<'_>) -> Option<Node<'_>> {
    for _ in 0..64 {
        node = match node.kind() {
            "command" => return Some(node),
            "pipeline" | "negated_command" => {
                let count = node.named_child_count();
                node.named_child(u32::try_from(count.checked_sub(1)?).ok()?)?
            }
            "redirected_statement" => node.child_by_field_name("body")?,
            _ => return None,
        };
    }
    None
}

fn simple_command<'t>(
    node: Node<'t>,
    src: &str,
    stdin: Option<(&'static str, Option<Feed<'t>>)>,
    extra: Vec<Word>,
) -> SimpleCommand {
    let mut words = Vec::new();
    let mut stdin = stdin;
    let mut named = false;
    let mut cursor = node.walk();
    for (i, child) in node.children(&mut cursor).enumerate() {
        let field = u32::try_from(i)
            .ok()
            .and_then(|i| node.field_name_for_child(i));
        match field {
            Some("name") => {
                named = true;
                words.push(match child.named_child(0) {
                    Some(inner) => word(inner, src),
                    None => word(child, src),
                });
            }
            Some("argument") => words.push(word(child, src)),
            Some("redirect") => match child.kind() {
                "herestring_redirect" => {
                    stdin = Some(("a here string", child.named_child(0).map(Feed::Word)));
                }
                "file_redirect" => {
                    if reads_stdin(child, src) {
                        stdin = Some(("a redirection", None));
                    }
                    if named {
                        words.extend(spilled_arguments(child, src));
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    words.extend(extra);
    SimpleCommand {
        words,
        text: text(node, src).to_owned(),
        stdin: stdin.map(|(from, feed)| Stdin {
            from,
            text: feed.and_then(|f| match f {
                Feed::Body(body) => Some(text(body, src).to_owned()),
                Feed::Word(w) => word(w, src).as_literal().map(str::to_owned),
            }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::super::{Word, parse};

    fn lits(script: &str) -> Vec<Vec<String>> {
        let parsed = parse(script);
        assert!(parsed.hidden.is_empty(), "{script}: {:?}", parsed.hidden);
        parsed
            .commands
            .iter()
            .map(|c| {
                c.words
                    .iter()
                    .map(|w| match w {
                        Word::Literal(s) => s.clone(),
                        Word::Hidden(h) => format!("<{}>", h.what),
                    })
                    .collect()
            })
            .collect()
    }

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn every_construct_yields_the_commands_inside_it() {
        let push = v(&["git", "push"]);
        for script in [
            "a | git push",
            "a && git push || b",
            "(git push)",
            "{ git push; }",
            "echo $(git push)",
            "echo `git push`",
            "echo \"$(git push)\"",
            "cat <(git push) >(git push)",
            "f() { git push; }",
            "for x in 1; do git push; done",
            "for ((;;)); do git push; done",
            "while git push; do :; done",
            "until git push; do :; done",
            "if a; then git push; elif b; then c; else d; fi",
            "case x in x) git push;; esac",
            "[[ $(git push) ]]",
            "! git push",
            "x=$(git push) y",
            "declare x=$(git push)",
            "cat <<EOF\n$(git push)\nEOF\n",
            "cat <<< $(git push)",
            "echo $(( $(git push) ))",
        ] {
            let found = lits(script);
            assert!(found.contains(&push), "{script}: {found:?}");
        }
    }

    #[test]
    fn words_after_a_redirection_target_stay_arguments() {
        assert_eq!(lits("git >/dev/null push"), [v(&["git", "push"])]);
        assert_eq!(
            lits("git 2>&1 push origin"),
            [v(&["git", "push", "origin"])]
        );
        assert_eq!(lits("2>/dev/null git push"), [v(&["git", "push"])]);
        assert_eq!(lits("cat <<EOF extra\nbody\nEOF\n"), [v(&["cat", "extra"])]);
    }

    #[test]
    fn arithmetic_in_a_here_document_is_not_a_command() {
        assert_eq!(
            lits("cat <<EOF\n$((6*7)) $(( $(git push) + 1 ))\nEOF\n"),
            [v(&["cat"]), v(&["git", "push"])]
        );
        assert_eq!(
            lits("echo $( (git push) )"),
            [
                v(&["echo", "<the output of `$( (git push) )`>"]),
                v(&["git", "push"])
            ]
        );
    }

    #[test]
    fn stdin_sources_are_recorded() {
        let p = parse("a | bash; python3 - <<'EOF'\nprint(1)\nEOF\nsh <<< x; sh < f; sh");
        let stdin: Vec<_> = p
            .commands
            .iter()
            .map(|c| {
                (
                    c.words[0].as_literal().unwrap().to_owned(),
                    c.stdin.as_ref().map(|s| s.from),
                )
            })
            .collect();
        assert_eq!(
            stdin,
            [
                ("a".to_owned(), None),
                ("bash".to_owned(), Some("a pipe")),
                ("python3".to_owned(), Some("a here document")),
                ("sh".to_owned(), Some("a here string")),
                ("sh".to_owned(), Some("a redirection")),
                ("sh".to_owned(), None),
            ]
        );
    }

    #[test]
    fn assignments_to_code_variables_are_hidden() {
        assert!(!parse("PROMPT_COMMAND='git push'").hidden.is_empty());
        assert!(!parse("export BASH_ENV=x; FOO=1 true").hidden.is_empty());
        assert!(parse("FOO=$(date) true").hidden.is_empty());
    }
}
