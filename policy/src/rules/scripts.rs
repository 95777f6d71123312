//! Views of programs that run script text: shells (`sh -c`, a here document), `su -c`,
//! interpreters (a program from stdin, `python -m`), `eval`, `watch` and `trap`.

use crate::shell::{Hidden, Stdin, Word};

use super::programs::{Arity, Program};
use super::views::{Explorer, command_name};

impl Explorer {
    pub(super) fn shell(
        &mut self,
        name: &str,
        program: &Program,
        rest: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let mut i = 0;
        let mut command_mode = false;
        let mut stdin_mode = false;
        while let Some(w) = rest.get(i) {
            let w = match w {
                Word::Literal(w) => w,
                // A script file named by a hidden word (`sh "$dir"/x.sh`, `zsh -n "$f"`): one
                // word that is not an option runs like any program.
                Word::Hidden(h)
                    if (!h.splits || !h.prefix.is_empty())
                        && !h.prefix.starts_with(['-', '+'])
                        && (!h.prefix.is_empty() || i + 1 == rest.len()) =>
                {
                    break;
                }
                Word::Hidden(h) => {
                    self.hidden(format!("{} given to `{name}`", h.what));
                    return;
                }
            };
            if w == "--" || w == "-" {
                i += 1;
                break;
            }
            if w.starts_with("--") {
                i += if program.with_value.contains(&w.as_str()) {
                    2
                } else {
                    1
                };
                continue;
            }
            if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
                let letters = &w[1..];
                if w.starts_with('-') {
                    command_mode |= letters.contains('c');
                    stdin_mode |= letters.contains('s');
                }
                i += if letters.ends_with(['o', 'O']) { 2 } else { 1 };
                continue;
            }
            break;
        }
        if command_mode {
            match rest.get(i) {
                Some(Word::Literal(script)) => self.scripts.push(script.clone()),
                Some(Word::Hidden(Hidden {
                    template: Some(script),
                    ..
                })) => self.scripts.push(script.clone()),
                Some(Word::Hidden(h)) => self.hidden(format!("{} run by `{name} -c`", h.what)),
                None => {}
            }
        } else if (stdin_mode || rest.get(i).is_none())
            && let Some(stdin) = stdin
        {
            match &stdin.text {
                Some(script) => self.scripts.push(script.clone()),
                None => self.hidden(format!("the script `{name}` reads from {}", stdin.from)),
            }
        } else if !stdin_mode
            && let Some(script) = rest.get(i..)
            && script.first().and_then(command_name).is_some()
        {
            // A script file: the rules also see it as the program (`sh deploy.sh` is
            // `deploy.sh`, and so is what the kernel runs for a `#!/bin/sh` script). A file
            // named by a hidden word runs like any program: it is not a hidden command.
            self.explore(script.to_vec(), stdin, depth + 1);
        }
    }

    pub(super) fn su(&mut self, rest: &[Word]) {
        for (i, w) in rest.iter().enumerate() {
            let Some(w) = w.as_literal() else { continue };
            let script = if w == "-c" || w == "--command" || w == "--session-command" {
                rest.get(i + 1).cloned()
            } else {
                w.strip_prefix("--command=")
                    .or_else(|| w.strip_prefix("--session-command="))
                    .map(Word::literal)
            };
            self.shell_script(script.as_ref(), "su -c");
        }
    }

    pub(super) fn interpreter(
        &mut self,
        name: &str,
        program: &Program,
        modules: bool,
        rest: &[Word],
        stdin: Option<&Stdin>,
        depth: usize,
    ) {
        let mut reads_stdin = false;
        for operand in interpreter_operands(program, modules, rest) {
            match operand {
                Operand::Stdin => reads_stdin = true,
                Operand::Hidden => {}
                Operand::TooMany => {
                    let what = format!("what `{name}` runs: its options have too many readings");
                    self.truncated.get_or_insert_with(|| what.clone());
                    self.hidden(what);
                }
                // `python -m twine upload`: the module runs like the program of that name.
                Operand::Module(i, at) => {
                    let w = rest[i].as_literal().unwrap_or_default();
                    let (module, args) = if at >= w.len() {
                        (rest.get(i + 1).cloned(), rest.get(i + 2..))
                    } else {
                        (Some(Word::literal(&w[at..])), rest.get(i + 1..))
                    };
                    // `-m twine.__main__` is what `-m twine` runs (an eighth red-team pass).
                    let module = module.map(|m| match m.as_literal() {
                        Some(name) => match name.strip_suffix(".__main__") {
                            Some(package) => Word::literal(package),
                            None => m,
                        },
                        None => m,
                    });
                    if let Some(module) = module {
                        let args = args.unwrap_or_default();
                        self.module_runner(&module, args, stdin, depth);
                        let mut view = vec![module];
                        view.extend(args.iter().cloned());
                        self.explore(view, stdin, depth + 1);
                    }
                }
                // A program file: the rules also see it as the program (`python3 tool.py`
                // is `tool.py`, and so is what the kernel runs for a `#!` script).
                Operand::Script(i) => self.explore(rest[i..].to_vec(), stdin, depth + 1),
            }
        }
        if reads_stdin && let Some(stdin) = stdin {
            self.hidden(format!("the program `{name}` reads from {}", stdin.from));
        }
    }

    /// Python's modules that run another module in their process (review, 2026-12-07):
    /// `-m runpy twine upload`, and `-m pdb -m twine upload` (pdb, cProfile, profile; trace
    /// with `--module`) are `twine upload`.
    fn module_runner(&mut self, module: &Word, args: &[Word], stdin: Option<&Stdin>, depth: usize) {
        let next = |flags: &[&str]| {
            args.iter()
                .position(|w| w.as_literal().is_some_and(|s| flags.contains(&s)))
                .map(|at| args[at + 1..].to_vec())
        };
        let inner = match module.as_literal() {
            Some("runpy") => Some(args.to_vec()),
            Some("pdb" | "cProfile" | "profile") => next(&["-m"]),
            Some("trace") => next(&["-m", "--module"]),
            _ => None,
        };
        if let Some(inner) = inner.filter(|i| !i.is_empty()) {
            self.explore(inner, stdin, depth + 1);
        }
    }

    /// A script given as one word: parsed when literal, hidden otherwise.
    pub(super) fn shell_script(&mut self, word: Option<&Word>, by: &str) {
        match word {
            Some(Word::Literal(script)) => self.scripts.push(script.clone()),
            Some(Word::Hidden(h)) => self.hidden(format!("{} run by `{by}`", h.what)),
            None => {}
        }
    }

    /// Words joined with spaces and run as a script (`eval`, `watch`).
    pub(super) fn eval_like(&mut self, rest: &[Word], by: &str) {
        let mut script = Vec::new();
        for w in rest {
            match w {
                Word::Literal(s) => script.push(s.as_str()),
                Word::Hidden(h) => {
                    self.hidden(format!("{} given to `{by}`", h.what));
                    return;
                }
            }
        }
        if !script.is_empty() {
            self.scripts.push(script.join(" "));
        }
    }

    pub(super) fn trap(&mut self, rest: &[Word]) {
        let mut i = 0;
        while let Some(w) = rest.get(i).and_then(Word::as_literal) {
            if w == "--" {
                i += 1;
                break;
            }
            if matches!(w, "-p" | "-l" | "-P") {
                return;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            i += 1;
        }
        let operands = rest.get(i..).unwrap_or_default();
        if operands.len() < 2 {
            return;
        }
        match &operands[0] {
            Word::Literal(action) if action.is_empty() || action == "-" => {}
            Word::Literal(action) => self.scripts.push(action.clone()),
            Word::Hidden(h) => self.hidden(format!("{} given to `trap`", h.what)),
        }
    }
}

/// What an interpreter's words after its name (`rest`) run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operand {
    /// A program it reads from stdin.
    Stdin,
    /// Program text on the command line (`python -c`), or a word that is not known.
    Hidden,
    /// The module `-m` in `rest[i]` names: the rest of that word from byte `at` (`-mNAME`,
    /// `-ImNAME`), or the next word when nothing follows (`-m NAME`, `-Im NAME`).
    Module(usize, usize),
    /// The program file `rest[i]`, with its arguments after it.
    Script(usize),
    /// More readings of the options than are followed.
    TooMany,
}

/// The most readings of one interpreter's options followed; past it, what it runs asks.
const MAX_READINGS: usize = 32;

/// Where an interpreter's words after its name lead: past its options to a program file, a
/// module, program text or stdin. An option that may or may not take a value (node's unknown
/// long options) gives both readings, each position read once; past [`MAX_READINGS`]
/// distinct readings, what runs is unknown ([`Operand::TooMany`]).
pub(super) fn interpreter_operands(
    program: &Program,
    modules: bool,
    rest: &[Word],
) -> Vec<Operand> {
    let mut out = Vec::new();
    let mut frontier = vec![0usize];
    let mut seen = std::collections::HashSet::new();
    while let Some(i) = frontier.pop() {
        if !seen.insert(i) {
            continue;
        }
        if out.len() >= MAX_READINGS {
            out.push(Operand::TooMany);
            break;
        }
        let found = interpreter_operand(program, modules, rest, i, &mut frontier);
        if let Some(operand) = found.filter(|o| !out.contains(o)) {
            out.push(operand);
        }
    }
    out
}

/// One reading from `rest[i]` on: its operand, or `None` when it branched (both readings of an
/// option pushed on `frontier`).
fn interpreter_operand(
    program: &Program,
    modules: bool,
    rest: &[Word],
    mut i: usize,
    frontier: &mut Vec<usize>,
) -> Option<Operand> {
    loop {
        let operand = match rest.get(i) {
            None => Operand::Stdin,
            Some(Word::Hidden(_)) => Operand::Hidden,
            Some(Word::Literal(w)) if w == "-" => Operand::Stdin,
            Some(Word::Literal(w)) if w == "--" => match rest.get(i + 1) {
                None => Operand::Stdin,
                Some(w) if w.as_literal() == Some("-") => Operand::Stdin,
                Some(Word::Hidden(_)) => Operand::Hidden,
                Some(Word::Literal(_)) => Operand::Script(i + 1),
            },
            Some(Word::Literal(w))
                if matches!(w.as_str(), "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0") =>
            {
                Operand::Stdin
            }
            // A cluster of short options, read left to right (`-Im`, `-rset`, `-we`): `-m` names
            // the module, a code option (`-e`, `-c`) takes program text, and an option taking a
            // value takes the rest of the word, or the next word (`-Wm` warns about `m`).
            Some(Word::Literal(w)) if w.starts_with('-') && !w.starts_with("--") => {
                match module_in_cluster(program, modules, w) {
                    Cluster::Module(at) => Operand::Module(i, at),
                    Cluster::Code => Operand::Hidden,
                    Cluster::Flags => {
                        i += 1;
                        continue;
                    }
                    Cluster::ValueNext => {
                        i += 2;
                        continue;
                    }
                }
            }
            Some(Word::Literal(w)) if Program::has_option(w, program.special) => Operand::Hidden,
            Some(Word::Literal(w)) if w.starts_with('-') => {
                match program.arity(w) {
                    Arity::Flag => i += 1,
                    Arity::Value => i += 2,
                    Arity::Either => {
                        frontier.push(i + 1);
                        frontier.push(i + 2);
                        return None;
                    }
                }
                continue;
            }
            Some(Word::Literal(_)) => Operand::Script(i),
        };
        return Some(operand);
    }
}

/// What a cluster of short options of an interpreter that runs modules does.
enum Cluster {
    /// `-m` at this byte's end: the module is the rest of the word, or the next word.
    Module(usize),
    /// Program text (`-c`).
    Code,
    /// Flags only.
    Flags,
    /// Its last option takes the next word as its value (`-W`, then `ignore`).
    ValueNext,
}

fn module_in_cluster(program: &Program, modules: bool, word: &str) -> Cluster {
    for (k, c) in word.char_indices().skip(1) {
        let option = format!("-{c}");
        let after = k + c.len_utf8();
        if modules && c == 'm' {
            return Cluster::Module(after);
        }
        if program.special.contains(&option.as_str()) {
            return Cluster::Code;
        }
        if program.with_value.contains(&option.as_str()) {
            return if after >= word.len() {
                Cluster::ValueNext
            } else {
                Cluster::Flags
            };
        }
    }
    Cluster::Flags
}
