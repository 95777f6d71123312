//! The rule engine over a corpus of real-world command lines (`corpus/commands.jsonl`, see its
//! README): every command is decided under read-only, workspace-write, workstation and
//! ci-locked, and
//!
//! - (a) false asks (an ask where `catch` is empty) under workspace-write stay ≤ 0.5 %;
//! - (b) every `catch` entry is caught under the profile its rule belongs to, by that rule,
//!   with the rule's decision;
//! - (c) no shipped rule denies or asks for a command whose `catch` does not name it, except
//!   the listed disagreements, each with its reason.
//!
//! `cargo test -p bridle-policy --test corpus -- --nocapture` prints the measured rates.

#![cfg(test)]

mod support;

use std::collections::BTreeMap;

use bridle_policy::{DecidedBy, Decision, Origin, Plan};
use serde_json::Value;

use support::shipped_plan;

const CORPUS: &str = include_str!("corpus/commands.jsonl");

/// The collected corpus has 3,790 entries; the issue asks for at least 2,000.
const MIN_ENTRIES: usize = 2_000;

/// The most false asks allowed under workspace-write: 0.5 %.
const MAX_FALSE_ASK_RATE: f64 = 0.005;

const PROFILES: [&str; 4] = ["read-only", "workspace-write", "workstation", "ci-locked"];

/// `workstation` in `danger-full-access`: its rules with no exec supervisor to guarantee them,
/// so what the rules cannot see asks.
const TEXT_ONLY: &str = "workstation, text only";

/// The rows of the table: the shipped profiles, then workstation deciding on text alone.
const ROWS: [&str; 5] = [
    PROFILES[0],
    PROFILES[1],
    PROFILES[2],
    PROFILES[3],
    TEXT_ONLY,
];

/// Commands where the engine is stricter than the corpus labels on purpose, by the start of
/// the command text. The engine may be stricter, never laxer.
const STRICTER_ON_PURPOSE: &[(&str, &str)] = &[
    ("replace_etc_environment_variable() {", FUNCTION_BODIES),
    ("get_pr_json() {", FUNCTION_BODIES),
    ("get_latest_git_version() {", FUNCTION_BODIES),
];

/// The corpus labels a function that the entry never calls as running nothing.
const FUNCTION_BODIES: &str = "a function body is checked where it is defined: the call may \
     come later (the terminal's next input, a sourced file) where the body cannot be seen";

struct Entry {
    cmd: String,
    kind: String,
    catch: Vec<String>,
}

fn entries() -> Vec<Entry> {
    CORPUS
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("commands.jsonl line {}: {e}", i + 1));
            let text = |key: &str| {
                v[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("commands.jsonl line {}: no `{key}`", i + 1))
                    .to_owned()
            };
            Entry {
                cmd: text("cmd"),
                kind: text("kind"),
                catch: v["catch"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// The profile whose file defines rule `id`.
fn home_profile(id: &str, plans: &BTreeMap<&str, Plan>) -> &'static str {
    for name in PROFILES {
        let defined_here = plans[name].command_rules.iter().any(|r| {
            r.id == id
                && matches!(&r.origin, Origin::File { file, .. } if file == &format!("profiles/{name}.yaml"))
        });
        if defined_here {
            return name;
        }
    }
    panic!("corpus names rule `{id}`, which no shipped profile defines")
}

#[derive(Default)]
struct Tally {
    allow: usize,
    ask_rule: usize,
    ask_hidden: usize,
    at_exec: usize,
    deny: usize,
    false_ask: usize,
    false_deny: usize,
}

fn short(cmd: &str) -> String {
    let one: String = cmd.replace('\n', "\\n").chars().take(110).collect();
    one
}

#[test]
fn corpus_decisions_meet_the_targets() {
    let entries = entries();
    assert!(
        entries.len() >= MIN_ENTRIES,
        "the corpus has {} entries, fewer than {MIN_ENTRIES}",
        entries.len()
    );
    let mut plans: BTreeMap<&str, Plan> = PROFILES.iter().map(|p| (*p, shipped_plan(p))).collect();
    plans.insert(TEXT_ONLY, support::text_only_plan("workstation"));
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut missed = Vec::new();
    let mut unexpected = Vec::new();
    let mut hidden_asks: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut by_kind: BTreeMap<(&str, String), (usize, usize)> = BTreeMap::new();
    for entry in &entries {
        let on_purpose = STRICTER_ON_PURPOSE
            .iter()
            .any(|(start, _)| entry.cmd.starts_with(start));
        for name in ROWS {
            let verdict = plans[name].decide_bash(&entry.cmd);
            let tally = tallies.entry(name).or_default();
            let rule = match &verdict.by {
                DecidedBy::Rule { id, .. } => Some(id.as_str()),
                _ => None,
            };
            if matches!(verdict.by, DecidedBy::AtExec { .. }) {
                tally.at_exec += 1;
            }
            match verdict.decision {
                Decision::Allow => tally.allow += 1,
                Decision::Ask if rule.is_some() => tally.ask_rule += 1,
                Decision::Ask => tally.ask_hidden += 1,
                Decision::Deny => tally.deny += 1,
            }
            let kind = by_kind.entry((name, entry.kind.clone())).or_default();
            kind.0 += 1;
            if entry.catch.is_empty() && verdict.decision == Decision::Ask {
                tally.false_ask += 1;
                kind.1 += 1;
                hidden_asks.entry(name).or_default().push(format!(
                    "{} -- {}",
                    short(&entry.cmd),
                    verdict.reason
                ));
            }
            // (c) a rule that fired must be one the entry names.
            if let Some(id) = rule
                && verdict.decision >= Decision::Ask
                && !entry.catch.iter().any(|c| c == id)
            {
                if verdict.decision == Decision::Deny {
                    tally.false_deny += 1;
                }
                if !on_purpose {
                    unexpected.push(format!(
                        "{name}: {} by `{id}` but catch is {:?}: {}",
                        verdict.decision,
                        entry.catch,
                        short(&entry.cmd)
                    ));
                }
            }
        }
        // (b) each labelled rule catches the command under its own profile.
        for id in &entry.catch {
            let home = home_profile(id, &plans);
            let plan = &plans[home];
            let Some(rule) = plan.command_rules.iter().find(|r| &r.id == id) else {
                continue;
            };
            // Caught: that rule decides, or another labelled rule at least as strict (strictest
            // wins and names one of them: `sudo git push` is deny-sudo on a workstation).
            let verdict = plan.decide_bash(&entry.cmd);
            let ok = verdict.decision >= rule.decision
                && matches!(&verdict.by, DecidedBy::Rule { id: got, .. } if entry.catch.contains(got));
            if !ok {
                missed.push(format!(
                    "{home}: want `{id}` ({}), got {}: {} -- {}",
                    rule.decision,
                    verdict.decision,
                    short(&entry.cmd),
                    verdict.reason
                ));
            }
        }
    }
    let total = entries.len();
    println!("rule engine over {total} corpus entries:");
    println!(
        "{:<22} {:>6} {:>8} {:>9} {:>11} {:>6} {:>10} {:>11}",
        "profile", "allow", "at exec", "ask:rule", "ask:hidden", "deny", "false ask", "false deny"
    );
    for name in ROWS {
        let t = &tallies[name];
        println!(
            "{name:<22} {:>6} {:>8} {:>9} {:>11} {:>6} {:>5} ({:.2} %) {:>5}",
            t.allow,
            t.at_exec,
            t.ask_rule,
            t.ask_hidden,
            t.deny,
            t.false_ask,
            100.0 * t.false_ask as f64 / total as f64,
            t.false_deny,
        );
    }
    for ((name, kind), (n, false_asks)) in &by_kind {
        if *name == TEXT_ONLY {
            println!(
                "  {TEXT_ONLY}: false asks, {kind}: {false_asks} of {n} ({:.2} %)",
                100.0 * *false_asks as f64 / *n as f64
            );
        }
    }
    for (name, asks) in &hidden_asks {
        if *name == TEXT_ONLY {
            println!("{TEXT_ONLY}: false asks ({}):", asks.len());
            for a in asks {
                println!("  {a}");
            }
        }
    }
    let labelled: usize = entries.iter().map(|e| e.catch.len()).sum();
    println!(
        "labelled catches: {labelled}, missed: {}; unexpected rule decisions: {}",
        missed.len(),
        unexpected.len()
    );
    // With the exec supervisor deciding what hidden parts run, the shipped profiles with rules
    // ask for nothing no rule names either.
    for name in ["workspace-write", "workstation", "ci-locked"] {
        let t = &tallies[name];
        let rate = t.false_ask as f64 / total as f64;
        assert!(
            rate <= MAX_FALSE_ASK_RATE,
            "false asks under {name}: {} of {total} ({:.2} %)",
            t.false_ask,
            100.0 * rate
        );
    }
    assert!(missed.is_empty(), "missed catches:\n{}", missed.join("\n"));
    assert!(
        unexpected.is_empty(),
        "rules fired on commands not labelled for them:\n{}",
        unexpected.join("\n")
    );
}

#[test]
fn the_stricter_on_purpose_list_names_real_entries() {
    let entries = entries();
    for (start, why) in STRICTER_ON_PURPOSE {
        assert!(!why.is_empty());
        assert!(
            entries.iter().any(|e| e.cmd.starts_with(start)),
            "no corpus entry starts with {start:?}"
        );
    }
}
