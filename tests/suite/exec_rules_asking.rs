//! A question at an exec holds that exec only: the sandbox's other processes run, are denied
//! and reported while a person thinks, and a question whose process is gone is withdrawn.

use super::exec_rules::{assert_nothing_pushed, script, with_remote};
use super::support::{assert_contains_all, path_str, pty_command, run, tool_result_in_pty};

#[test]
fn other_execs_go_on_and_are_reported_while_a_person_answers_a_question() {
    // Refused at the notification: the exec fails with `EACCES` (126 from bash).
    others_go_on_while_a_person_answers(&[], "126");
}

#[test]
fn tracing_the_whole_tree_a_question_holds_only_its_process() {
    // No seccomp filter: one thread of the launcher traces the tree and decides every exec at
    // its exec event, where a refused one is killed (137 from bash).
    others_go_on_while_a_person_answers(&["--mode", "danger-full-access"], "137");
}

/// `bridle --profile workstation COMMAND MODE... REST...`.
fn workstation<'a>(command: &'a str, mode: &[&'a str], rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--profile", "workstation", command];
    args.extend_from_slice(mode);
    args.extend_from_slice(rest);
    args
}

/// A push asks in the background (answered no once the rest is done) while the script's other
/// execs run, one of them refused; `mode`: flags before `--`; `refused`: the status bash gives
/// a refused exec.
fn others_go_on_while_a_person_answers(mode: &[&str], refused: &str) {
    let e = with_remote();
    // The push waits for its answer in the background; the rest of the script runs meanwhile:
    // execs allowed (`sleep`, `cp`, `true`) and one denied (`deny-sudo`), each reported.
    let name = script(
        &e,
        "meanwhile.sh",
        "( git push -q origin HEAD:main; echo \"pushed=$?\" > pushed.txt ) &\n\
         sleep 1\n\
         cp /bin/true ./sudo\n\
         ./sudo make install; echo \"sudo=$?\"\n\
         for i in 1 2 3; do /bin/true; done\n\
         echo ran > others.done\n\
         wait\n\
         cat pushed.txt",
    );
    let done = e.workspace.join("repo/others.done");
    let args = workstation("exec", mode, &["--", &name]);
    let mut cmd = pty_command(&args, &e.home, &e.workspace, Some("n"), None);
    cmd.env("BRIDLE_TEST_PTY_ANSWER_AFTER", path_str(&done));
    let r = run(&mut cmd);
    assert!(
        r.stdout.contains("[pty driver: answered after it existed]"),
        "the other execs waited for the answer:\n{}",
        r.stdout
    );
    assert_contains_all(
        &r.stdout,
        &[
            "approval needed for tool `exec`",
            &format!("sudo={refused}"),
            "rule deny-sudo denied exec of",
            &format!("pushed={refused}"),
            "rule ask-git-push needs approval for exec of",
        ],
    );
    assert_nothing_pushed(&e, "a question answered no");
}

#[test]
fn a_question_whose_process_is_killed_is_withdrawn_and_recorded_so() {
    killed_while_asking_is_withdrawn(&[]);
}

#[test]
fn tracing_the_whole_tree_a_question_whose_process_is_killed_is_withdrawn() {
    killed_while_asking_is_withdrawn(&["--mode", "danger-full-access"]);
}

/// A push asks; its process is killed before anyone answers. `mode`: flags of the run.
fn killed_while_asking_is_withdrawn(mode: &[&str]) {
    let e = with_remote();
    let name = script(
        &e,
        "killed.sh",
        "git push -q origin HEAD:main &\np=$!\nsleep 1\nkill -9 $p\nwait $p\necho \"killed=$?\"\nsleep 1",
    );
    // (The last second lets the withdrawal come before the run ends: a question still open
    // when the run ends is withdrawn as the run's, `the run ended before anyone answered`.)
    let gone = "withdrawn: the process stopped waiting before anyone answered";
    // Nobody answers: the run ends once the question is withdrawn.
    let started = std::time::Instant::now();
    let args = workstation("exec", mode, &["--", &name]);
    let r = run(&mut pty_command(&args, &e.home, &e.workspace, None, None));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "{}",
        r.stdout
    );
    assert_contains_all(
        &r.stdout,
        &[
            "killed=137",
            "question withdrawn: what it was about ended before an answer",
            &format!("{gone}; denied"),
        ],
    );
    assert_nothing_pushed(&e, "a question withdrawn, exec");

    // Through the bash tool, the call's result keeps the same answer.
    let bash = serde_json::json!({ "command": name }).to_string();
    let args = workstation("tool", mode, &["bash", &bash]);
    let r = run(&mut pty_command(&args, &e.home, &e.workspace, None, None));
    let v = tool_result_in_pty(&r);
    assert!(v["content"].as_str().unwrap().contains("killed=137"), "{v}");
    let decision = &v["sandbox"]["exec_decisions"][0];
    assert_eq!(decision["decision"], "ask", "{v}");
    assert_eq!(decision["outcome"], "refused", "{v}");
    assert_eq!(decision["answer"], gone, "{v}");
    assert_nothing_pushed(&e, "a question withdrawn, bash tool");
}

#[test]
fn tracing_the_whole_tree_past_64_open_questions_an_exec_is_refused_unasked() {
    let e = with_remote();
    // Nobody answers: 64 pushes wait for a person, the others are refused at once, reported;
    // then every push still waiting is killed.
    let name = script(
        &e,
        "many.sh",
        "for i in $(seq 70); do git push -q origin HEAD:main 2>/dev/null & done\n\
         sleep 4\n\
         kill -9 $(jobs -p) 2>/dev/null\n\
         wait\n\
         echo all-gone",
    );
    let args = workstation("exec", &["--mode", "danger-full-access"], &["--", &name]);
    let r = run(&mut pty_command(&args, &e.home, &e.workspace, None, None));
    assert_contains_all(
        &r.stdout,
        &[
            "all-gone",
            "unavailable: the exec supervisor has no thread free to wait for an answer",
            "too many execs or questions at once",
        ],
    );
    let refused = r
        .stdout
        .matches("too many execs or questions at once")
        .count();
    assert!(
        (1..=6).contains(&refused),
        "{refused} refused:\n{}",
        r.stdout
    );
    assert_nothing_pushed(&e, "past the open questions");
}
