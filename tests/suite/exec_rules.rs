//! Command rules at every exec (the exec supervisor): every way of getting `git push` past a
//! command-line check, tried under `ci-locked` through `bridle exec`, the `bash` tool, the
//! persistent terminal across calls, and a process tree five levels deep started by a script
//! file — each is denied, attributed to `deny-git-push`, and the push does not happen (a bare
//! repository in the workspace is the remote).

use std::path::Path;

use bridle_agent::log::Event;
use serde_json::Value;

use super::run_cli::{agent, events, session_id};
use super::support::{ExecEnv, Run, path_str, run, run_bounded};

/// `git ARGS` on the host, in `dir`, which must succeed.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A workspace with `repo/` (one commit, its `origin` the bare `remote.git` beside it).
pub(super) fn with_remote() -> ExecEnv {
    let e = ExecEnv::new();
    git(&e.workspace, &["init", "-q", "--bare", "remote.git"]);
    git(&e.workspace, &["init", "-q", "-b", "main", "repo"]);
    let repo = e.workspace.join("repo");
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["remote", "add", "origin", "../remote.git"]);
    e
}

/// Whether anything was pushed to `remote.git`.
#[track_caller]
pub(super) fn assert_nothing_pushed(e: &ExecEnv, what: &str) {
    let refs = git(&e.workspace.join("remote.git"), &["for-each-ref"]);
    assert!(refs.trim().is_empty(), "{what}: the push happened: {refs}");
}

/// Ways to push that a check of the command line alone would not stop, as lines of a bash
/// script run in `repo/`.
pub(super) const EVASIONS: &[(&str, &str)] = &[
    ("sh -c", "sh -c 'git push origin HEAD:main'"),
    (
        "script -qc",
        "script -qc 'git push origin HEAD:main' /dev/null",
    ),
    ("brace expansion", "{git,push,origin,HEAD:main}"),
    ("IFS", "git${IFS}push origin HEAD:main"),
    ("alias in -c", "git -c alias.p=push p origin HEAD:main"),
    (
        "! alias in -c",
        "git -c alias.x='!git push origin HEAD:main' x",
    ),
    ("env -S", "env -S 'git push origin HEAD:main'"),
    ("flock", "flock ../lock git push origin HEAD:main"),
    (
        "awk system",
        "awk 'BEGIN{system(\"git push origin HEAD:main\")}'",
    ),
    (
        "hash -p",
        "hash -p \"$(command -v git)\" p; p push origin HEAD:main",
    ),
    ("trap EXIT", "trap 'git push origin HEAD:main' EXIT"),
    (
        "expand_aliases",
        "shopt -s expand_aliases\nalias p='git push'\np origin HEAD:main",
    ),
    (
        "git's autocorrect",
        "git -c help.autocorrect=immediate psh origin HEAD:main",
    ),
    (
        "git's autocorrect past an alias git never reads",
        "printf '[alias]\\n\\tpsh = status\\n' > ../fake.cfg\n\
         GIT_CONFIG=../fake.cfg git -c help.autocorrect=immediate psh origin HEAD:main",
    ),
    (
        "a renamed git's autocorrect",
        "(exec -a foo git -c help.autocorrect=1 psh origin HEAD:main)",
    ),
    (
        "git's autocorrect of a subcommand with a byte that is not UTF-8",
        "git -c help.autocorrect=immediate $'pus\\xff' origin HEAD:main",
    ),
    (
        "git's autocorrect past a given alias git reads as another name",
        "git -c help.autocorrect=immediate -c \"alias.P\"$'\\xf0\\x9f\\x98'\".h=status\" \"p\"$'\\xff'\".h\" origin HEAD:main",
    ),
    (
        "an option whose value looks like a subcommand",
        "git --shallow-file status push origin HEAD:main",
    ),
    (
        "git's autocorrect from a config file",
        "git config help.autocorrect immediate\ngit pusj origin HEAD:main",
    ),
    (
        "alias in a config file",
        "export GIT_CONFIG_GLOBAL=../gitconfig\ngit config --global alias.pp push\ngit pp origin HEAD:main",
    ),
    (
        "a sourced file",
        "printf 'git push origin HEAD:main\\n' > ../push.sh\n. ../push.sh",
    ),
    ("a variable command name", "x=git; $x push origin HEAD:main"),
    (
        "eval of a variable",
        "c='git push origin HEAD:main'; eval \"$c\"",
    ),
    (
        "alias in a new repository's config",
        "cd ..; git init -q fresh; cd fresh; git remote add origin ../remote.git\n\
         git -c user.name=t -c user.email=t@e commit -q --allow-empty -m x\n\
         git config alias.up 'push origin HEAD:main'\ngit up",
    ),
];

/// Writes `body` as an executable bash script in the workspace and returns its name.
pub(super) fn script(e: &ExecEnv, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = e.write(
        name,
        format!("#!/bin/bash\ncd repo || exit 99\n{body}\necho end\n"),
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("./{name}")
}

#[track_caller]
pub(super) fn assert_attributed(text: &str, what: &str) {
    assert!(
        text.contains("rule deny-git-push denied exec of") && text.contains("(pid "),
        "{what}: no `bridle: rule deny-git-push denied exec of ... (pid N)` in\n{text}"
    );
}

#[test]
fn bridle_exec_denies_every_evasion_at_the_exec_and_names_the_rule() {
    let e = with_remote();
    for (i, (what, line)) in EVASIONS.iter().enumerate() {
        let name = script(&e, &format!("evasion-{i}.sh"), line);
        let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
        assert_attributed(&r.stderr, what);
        assert!(
            r.stderr
                .lines()
                .any(|l| l.starts_with("bridle: rule deny-git-push")),
            "{what}: {}",
            r.stderr
        );
        assert_nothing_pushed(&e, what);
    }
}

#[test]
fn bridle_exec_refuses_a_denied_exec_with_eacces_so_the_caller_goes_on() {
    let e = with_remote();
    let name = script(
        &e,
        "eacces.sh",
        "git push origin HEAD:main 2>err; echo \"status=$?\"; cat err",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
    r.assert_ok();
    // bash reports a refused exec as 126 with the errno's text.
    assert_eq!(r.value("status"), "126", "{}", r.stderr);
    assert!(r.stdout.contains("Permission denied"), "{}", r.stdout);
    assert!(r.stdout.contains("end"), "{}", r.stdout);
    assert_nothing_pushed(&e, "eacces");
}

/// `bridle tool bash ARGS` under ci-locked, in the workspace.
pub(super) fn bash_tool(e: &ExecEnv, command: &str) -> (Run, Value) {
    let mut cmd = e.bridle();
    cmd.args(["--profile", "ci-locked", "tool", "bash"])
        .arg(serde_json::json!({ "command": command }).to_string())
        .stdin(std::process::Stdio::null());
    let r = run(&mut cmd);
    let v: Value = serde_json::from_str(r.stdout.trim())
        .unwrap_or_else(|err| panic!("not JSON ({err}):\n{}\n{}", r.stdout, r.stderr));
    (r, v)
}

#[test]
fn the_bash_tool_denies_every_evasion_and_attributes_it() {
    let e = with_remote();
    for (i, (what, line)) in EVASIONS.iter().enumerate() {
        // Typed as the command itself: the command-line rules or the supervisor stop it.
        let (_, v) = bash_tool(&e, &format!("cd repo && {line}"));
        let content = v["content"].as_str().unwrap();
        assert!(content.contains("rule"), "{what}: {v}");
        // Refused before it ran, or failed because a rule refused an exec: either way a rule.
        if v["ok"] == false {
            assert_eq!(v["denied_by"], "rule", "{what}: {v}");
        }
        assert_nothing_pushed(&e, what);
        // In a script file the command line shows nothing: the supervisor stops it.
        let name = script(&e, &format!("tool-{i}.sh"), line);
        let (_, v) = bash_tool(&e, &name);
        let content = v["content"].as_str().unwrap();
        assert!(
            content.contains("[bridle: rule deny-git-push denied exec of"),
            "{what}: {v}"
        );
        let decisions = v["sandbox"]["exec_decisions"].as_array().unwrap();
        assert!(
            decisions
                .iter()
                .any(|d| d["rule"] == "deny-git-push" && d["decision"] == "deny"),
            "{what}: {v}"
        );
        assert_nothing_pushed(&e, what);
    }
}

#[test]
fn a_rule_denial_at_exec_is_attributed_to_the_rule_without_escalation_advice() {
    let e = with_remote();
    // The script fails with git's exec (EACCES), which reads like a file-system denial.
    e.write("s.sh", "cd repo && git push origin HEAD:main\n");
    let (_, v) = bash_tool(&e, "bash ./s.sh");
    assert_eq!(v["ok"], false, "{v}");
    let content = v["content"].as_str().unwrap();
    let denied = v["sandbox"]["denied_by_sandbox"]
        .as_str()
        .unwrap_or_default();
    assert!(
        denied.starts_with("rule deny-git-push denied exec of"),
        "{v}"
    );
    assert!(!content.contains("outside the writable roots"), "{v}");
    assert!(
        !content.contains("call again with `sandbox_permissions`"),
        "{v}"
    );
    assert!(content.contains("cannot lift a rule"), "{v}");
    assert_nothing_pushed(&e, "script");
}

#[test]
fn a_tree_five_levels_deep_started_by_a_script_file_is_supervised_with_its_ancestry() {
    let e = with_remote();
    // Each level starts the next with a different program.
    let levels = [
        ("l1.sh", "bash ./l2.sh"),
        ("l2.sh", "sh ./l3.sh"),
        ("l3.sh", "env bash ./l4.sh"),
        (
            "l4.sh",
            "python3 -c 'import subprocess; subprocess.run([\"sh\", \"./l5.sh\"])'",
        ),
        // Then every evasion, each from a script file of its own one level further down.
        (
            "l5.sh",
            "git push origin HEAD:main; echo pushed=$?\n\
             for f in \"$PWD\"/../tree-ev-*.sh; do (cd .. && bash \"$f\"); done",
        ),
    ];
    for (name, body) in levels {
        e.write(&format!("repo/{name}"), format!("{body}\n"));
    }
    for (i, (_, line)) in EVASIONS.iter().enumerate() {
        script(&e, &format!("tree-ev-{i}.sh"), line);
    }
    let top = script(&e, "deep.sh", "bash ./l1.sh");
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&top]));
    assert_attributed(&r.stderr, "deep tree");
    assert_eq!(r.value("pushed"), "126", "{}", r.stderr);
    let denials = r
        .stderr
        .matches("rule deny-git-push denied exec of")
        .count();
    assert!(denials > EVASIONS.len(), "{denials} denials:\n{}", r.stderr);
    assert_nothing_pushed(&e, "deep tree");
    let (_, v) = bash_tool(&e, &top);
    let decisions = v["sandbox"]["exec_decisions"].as_array().unwrap();
    // Every evasion denied by the rule, below the script that ran it.
    for (i, (what, _)) in EVASIONS.iter().enumerate() {
        let below = format!("tree-ev-{i}.sh");
        assert!(
            decisions.iter().any(|d| d["rule"] == "deny-git-push"
                && d["decision"] == "deny"
                && d["ancestry"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|a| a["command"].as_str().unwrap().contains(&below))),
            "{what}: no denial below {below}: {v}"
        );
    }
    let decision = decisions
        .first()
        .unwrap_or_else(|| panic!("no exec decision: {v}"))
        .clone();
    assert_eq!(decision["rule"], "deny-git-push", "{v}");
    assert_eq!(decision["decision"], "deny", "{v}");
    let ancestry: Vec<String> = decision["ancestry"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["command"].as_str().unwrap().to_owned())
        .collect();
    // l5.sh's shell, python, l4.sh, l3.sh (env then bash), l2.sh, l1.sh, deep.sh, the tool's bash.
    assert!(ancestry.len() >= 7, "{ancestry:?}");
    for level in ["l5.sh", "l4.sh", "l3.sh", "l2.sh", "l1.sh", "deep.sh"] {
        assert!(
            ancestry.iter().any(|c| c.contains(level)),
            "{level} missing from {ancestry:?}"
        );
    }
    assert_nothing_pushed(&e, "deep tree, bash tool");
}

#[test]
fn bridle_run_records_exec_decisions_with_the_call_that_caused_them() {
    let e = with_remote();
    let name = script(&e, "via-run.sh", "git push origin HEAD:main");
    let script = format!(
        "- tool_calls:\n    - name: bash\n      arguments: {{command: \"{name}\"}}\n- text: done\n"
    );
    let r = agent(&e, &script, &["--profile", "ci-locked"], "push");
    r.assert_code(0);
    let events = events(&e, &session_id(&r));
    let call_id = events
        .iter()
        .find_map(|ev| match ev {
            Event::ToolCall(call) => Some(call.call_id.clone()),
            _ => None,
        })
        .unwrap();
    let exec = events
        .iter()
        .find_map(|ev| match ev {
            Event::ExecDecision { call_id: c, exec } if *c == call_id => Some(exec.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exec/decision for {call_id}: {events:?}"));
    assert!(exec.program.ends_with("/git"), "{exec:?}");
    assert_eq!(exec.argv, ["git", "push", "origin", "HEAD:main"]);
    assert!(
        exec.message
            .starts_with("rule deny-git-push denied exec of ")
            && exec.message.contains(" push origin HEAD:main (pid "),
        "{exec:?}"
    );
    assert!(
        exec.ancestry.iter().any(|a| a.contains("via-run.sh")),
        "{exec:?}"
    );
    assert_nothing_pushed(&e, "bridle run");
    // A reviewer reads the rule's denial as the exec's decision, not as the sandbox's.
    let shown = super::run_log_cli::show(&e, &[&session_id(&r)]);
    assert!(
        shown
            .stdout
            .contains("exec: rule deny-git-push denied exec of")
            && !shown.stdout.contains("denied by the sandbox: rule"),
        "{}",
        shown.stdout
    );
    // Decisions are recorded before the result of the call that caused them.
    let at = |pred: &dyn Fn(&Event) -> bool| events.iter().position(pred).unwrap();
    assert!(
        at(&|ev| matches!(ev, Event::ExecDecision { .. }))
            < at(&|ev| matches!(ev, Event::ToolResult { .. }))
    );
    let _ = path_str(&e.workspace);
}

#[test]
fn bridle_exec_names_the_rule_in_one_line_before_the_failure_it_causes() {
    let e = with_remote();
    let name = script(&e, "plain-push.sh", "git push origin main");
    // A file for stderr: bridle pumps the command's output into it, between its own lines.
    let err_path = e.workspace.join("stderr.txt");
    let err_file = std::fs::File::create(&err_path).unwrap();
    let mut cmd = e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]);
    let status = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(err_file)
        .status()
        .expect("run bridle exec");
    assert!(status.success(), "{status:?}");
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    let git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let prefix = format!(
        "bridle: rule deny-git-push denied exec of {} push origin main (pid ",
        git.trim()
    );
    let at = lines
        .iter()
        .position(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line starting `{prefix}` in\n{stderr}"));
    let pid = lines[at][prefix.len()..].strip_suffix(')').unwrap_or("");
    assert!(
        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()),
        "{}",
        lines[at]
    );
    let failed = lines
        .iter()
        .position(|l| l.contains("Permission denied"))
        .unwrap_or_else(|| panic!("the shell did not report the failed exec:\n{stderr}"));
    assert!(
        at < failed,
        "the attribution came after the failure:\n{stderr}"
    );
    assert_nothing_pushed(&e, "plain push");
}

#[test]
fn a_bang_alias_is_denied_at_the_outer_git_before_its_shell_runs() {
    let e = with_remote();
    // Were only the inner `git push` stopped, the alias's shell would print its marker first.
    let name = script(
        &e,
        "bang.sh",
        "git -c alias.y='!echo alias-shell-ran; git push origin HEAD:main' y; echo status=$?",
    );
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]));
    assert_eq!(r.value("status"), "126", "{}", r.stderr);
    assert!(!r.stdout.contains("alias-shell-ran"), "{}", r.stdout);
    // The exec denied is the outer git's, with its alias (wherever git lives on this host).
    assert!(
        r.stderr
            .lines()
            .any(|l| l.contains("rule deny-git-push denied exec of /")
                && l.contains("/git -c alias.y=!echo alias-shell-ran; git push")),
        "{}",
        r.stderr
    );
    assert_nothing_pushed(&e, "a bang alias");
}

#[test]
fn a_git_command_planted_in_the_workspace_in_an_earlier_run_does_not_let_autocorrect_push() {
    // Found by a red-team pass on 2026-12-07. Run 1 makes a submodule git dir of the
    // workspace's repository holding a `git-psuh` that group and others may run but its owner
    // may not (git does not count it as a command). In run 2 that git dir's `hooks` is bound
    // read-only, which the supervisor took for "cannot change", and `git psuh`, finding no
    // `git-psuh` it counts, corrected itself to `git push` in its own process. A file that a
    // writable mount also shows is not relied on, whatever its mode (the owner's execute bit
    // is tested in `git_correct`'s unit tests, which can make a directory that cannot change).
    use std::os::unix::fs::PermissionsExt;
    for mode in ["011", "755"] {
        let e = ExecEnv::new();
        git(&e.workspace, &["init", "-q", "-b", "main"]);
        git(
            &e.workspace,
            &["commit", "-q", "--allow-empty", "-m", "first"],
        );
        git(&e.workspace, &["init", "-q", "--bare", "remote.git"]);
        git(&e.workspace, &["remote", "add", "origin", "remote.git"]);
        let run = |name: &str, body: &str| {
            let path = e.write(name, format!("#!/bin/bash\n{body}\necho end\n"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&format!("./{name}")]))
        };
        let r = run(
            "plant.sh",
            &format!(
                "m=.git/modules/evil; mkdir -p $m/hooks && : > $m/HEAD && printf '#!/bin/sh\\n' > $m/hooks/git-psuh && chmod {mode} $m/hooks/git-psuh"
            ),
        );
        assert!(r.stdout.contains("end"), "the plant failed:\n{}", r.stderr);
        let r = run(
            "psuh.sh",
            "PATH=$PWD/.git/modules/evil/hooks:$PATH git -c help.autocorrect=immediate psuh origin HEAD:main",
        );
        let what = format!("autocorrect past a planted git-psuh of mode {mode}");
        assert_attributed(&r.stderr, &what);
        assert_nothing_pushed(&e, &what);
    }
}
