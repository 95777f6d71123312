//! The exec supervisor against disguises: git under other names (a copy, a hard link, a
//! symlink, a copy in the private `/tmp`), git's own programs renamed, and a file replaced by
//! a copy of git after its first exec.

use super::exec_rules::{assert_nothing_pushed, script, with_remote};
use super::support::{ExecEnv, is_root, path_str, run_within};

/// The host's git.
fn host_git() -> &'static str {
    ["/usr/local/bin/git", "/usr/bin/git"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("git is installed")
}

#[test]
fn git_under_another_name_is_still_git() {
    let e = with_remote();
    // Made on the host: a hard link of the real git needs to own it (protected_hardlinks) or
    // be root; otherwise a hard link of a copy.
    let real = host_git();
    let linked = e.workspace.join("hardlinked-tool");
    if !(is_root() && std::fs::hard_link(real, &linked).is_ok()) {
        let copy = e.workspace.join(".copy-of-git");
        std::fs::copy(real, &copy).unwrap();
        std::fs::hard_link(&copy, &linked).unwrap();
    }
    let cases = [
        (
            "a copy",
            "cp \"$(command -v git)\" ../tool; ../tool push origin HEAD:main",
        ),
        (
            "a copy in the private /tmp",
            "cp \"$(command -v git)\" /tmp/t; /tmp/t push origin HEAD:main",
        ),
        (
            "a symlink",
            "ln -s \"$(command -v git)\" ../sym; ../sym push origin HEAD:main",
        ),
        ("a hard link", "../hardlinked-tool push origin HEAD:main"),
        (
            "the dynamic loader",
            "ld=$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -1); \"$ld\" \"$(command -v git)\" push origin HEAD:main",
        ),
        (
            "the dynamic loader with an option's value that would run nothing",
            "ld=$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -1); \"$ld\" --library-path --list \"$(command -v git)\" push origin HEAD:main",
        ),
        (
            "a valgrind tool run directly (it loads the program into its own process)",
            "t=$(ls /usr/libexec/valgrind/none-*-linux /usr/lib/*/valgrind/none-*-linux /usr/lib/valgrind/none-*-linux 2>/dev/null | head -1); test -n \"$t\" || { echo no valgrind tool >&2; exit 99; }; VALGRIND_LIB=$(dirname \"$t\") VALGRIND_LAUNCHER=$(command -v valgrind) \"$t\" -q --tool=none \"$(command -v git)\" push origin HEAD:main",
        ),
        (
            "a renamed copy run by valgrind (in its own process)",
            "cp \"$(command -v git)\" ../vg-other; valgrind -q --tool=none ../vg-other push origin HEAD:main",
        ),
        (
            "a renamed copy through the dynamic loader",
            "cp \"$(command -v git)\" ../other; ld=$(ls /lib64/ld-linux-*.so.* /lib/ld-linux-*.so.* 2>/dev/null | head -1); \"$ld\" ../other push origin HEAD:main",
        ),
        (
            "git's dashed form",
            "cp \"$(command -v git)\" ../git-send-pack; ../git-send-pack ../remote.git main",
        ),
        // git's own programs (not git) run for a subcommand: `git http-push` is one.
        (
            "a renamed copy of git's own http-push",
            "cp \"$(git --exec-path)/git-http-push\" ../hp; ../hp http://127.0.0.1:9/remote.git main",
        ),
        (
            "git's own http-push under another argv[0]",
            "exec -a other \"$(git --exec-path)/git-http-push\" http://127.0.0.1:9/remote.git main",
        ),
    ];
    // The cases with git's own http-push need it installed (git built with curl).
    let exec_path = std::process::Command::new("git")
        .arg("--exec-path")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .expect("run git --exec-path");
    let exec_path = String::from_utf8_lossy(&exec_path.stdout).trim().to_owned();
    assert!(
        std::path::Path::new(&exec_path)
            .join("git-http-push")
            .exists(),
        "`{exec_path}/git-http-push` is missing: these tests need git built with curl (Debian: \
         the git package)"
    );
    for (i, (what, line)) in cases.iter().enumerate() {
        let name = script(&e, &format!("renamed-{i}.sh"), line);
        let r = run_within(
            &mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]),
            std::time::Duration::from_secs(120),
        );
        assert!(
            r.stderr.contains("bridle: rule deny-git-push"),
            "{what}: not denied by the rule:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        assert_nothing_pushed(&e, what);
    }
}

#[test]
fn a_copy_of_git_as_the_command_itself_is_denied_naming_the_rule() {
    // The command's own exec, which the text cannot see as git: one line naming the rule (a
    // UX pass on 2026-12-07 found only `cannot run ...: Permission denied`), exit 126.
    use std::os::unix::fs::PermissionsExt;
    let e = with_remote();
    let tool = e.workspace.join("tool");
    std::fs::copy(host_git(), &tool).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = run_within(
        &mut e.exec_cmd(
            &["--profile", "ci-locked"],
            &[],
            &["./tool", "-C", "repo", "push", "origin", "HEAD:main"],
        ),
        std::time::Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(126), "{}", r.stderr);
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("bridle:"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "bridle: rule deny-git-push denied exec of {} -C repo push origin HEAD:main (it is git, as git push origin HEAD:main) (pid ",
            tool.display()
        )),
        "{}",
        r.stderr
    );
    assert_nothing_pushed(&e, "a copy of git as the command");
}

#[test]
fn a_file_replaced_by_a_copy_of_git_after_its_first_exec_is_git() {
    // The supervisor remembers what a file of git's size is (its digest) between execs: a
    // change to the file must not leave it known as something else.
    use std::os::unix::fs::PermissionsExt;
    let e = with_remote();
    let real = host_git();
    let size = usize::try_from(std::fs::metadata(real).unwrap().len()).unwrap();
    // A script exactly as large as git (padded with a comment), so that its digest is taken.
    let head = b"#!/bin/sh\necho first-ran\nexit 0\n#";
    let mut script_bytes = head.to_vec();
    script_bytes.resize(size - 1, b'x');
    script_bytes.push(b'\n');
    let tool = e.workspace.join("same-size");
    std::fs::write(&tool, &script_bytes).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Older than the supervisor's 2 s of settling, so that its digest is kept (a file changed
    // more recently is digested again at every exec).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let name = script(
        &e,
        "replaced.sh",
        "../same-size push origin HEAD:main\n\
         cp \"$(command -v git)\" ../same-size\n\
         ../same-size push origin HEAD:main; echo second=$?",
    );
    let r = run_within(
        &mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]),
        std::time::Duration::from_secs(120),
    );
    assert!(r.stdout.contains("first-ran"), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("bridle: rule deny-git-push") && r.stderr.contains("(it is git,"),
        "the copy of git was not recognised:\n{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(r.value("second"), "126", "{}", r.stderr);
    assert_nothing_pushed(&e, "a file replaced by a copy of git");
}

#[test]
fn a_copy_of_git_restored_through_a_dirty_mapping_after_its_digest_is_git() {
    // A writable file's change time does not follow its content: a write through a page that a
    // shared mapping already made dirty changes no timestamp (on tmpfs no mapped write does).
    // A red-team pass on 2026-12-07 pushed so: the copy digested as "not git" while one byte
    // was flipped (the exec failing, the mapping open), then the byte restored through the
    // same page, then the copy run as git.
    let e = with_remote();
    let name = script(
        &e,
        "remapped.sh",
        r#"cp "$(command -v git)" ./g
python3 - <<'PY'
import mmap, os, subprocess, time
fd = os.open("g", os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
at = 0x1000
byte = m[at]
m[at] = byte ^ 0xFF
time.sleep(3)
try:
    subprocess.run(["./g", "version"])
except OSError as e:
    print("digested:", e.errno)
m[at] = byte
m.close()
PY
cmp -s g "$(command -v git)" && echo restored=yes
./g push origin HEAD:main; echo pushed=$?"#,
    );
    let r = run_within(
        &mut e.exec_cmd(&["--profile", "ci-locked"], &[], &[&name]),
        std::time::Duration::from_secs(120),
    );
    assert!(r.stdout.contains("digested:"), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.value("restored"), "yes", "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.value("pushed"), "126", "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("bridle: rule deny-git-push") && r.stderr.contains("it is git"),
        "{}",
        r.stderr
    );
    assert_nothing_pushed(&e, "a copy of git restored through a dirty mapping");
}

#[test]
fn a_script_named_as_a_rule_program_is_denied_at_its_interpreter() {
    use std::os::unix::fs::PermissionsExt;
    let e = super::support::ExecEnv::new();
    // Scripts that only print: a rule naming `wget` still matches a script called `wget`,
    // run by its interpreter or through its interpreter line, before it runs a line.
    let shell = e.write("wget", "#!/bin/sh\necho shell-script-ran\n");
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    e.write("py/curl", "print('python-script-ran')\n");
    let line = "sh ./wget https://example.com; echo sh=$?\n\
                ./wget https://example.com; echo direct=$?\n\
                python3 py/curl https://example.com; echo python=$?\n\
                sh ./build.sh 2>/dev/null; echo other=$?";
    e.write("build.sh", "echo build-ran\n");
    // In a script file: the command line shows nothing, the execs decide.
    e.write("run.sh", line);
    let r = run_within(
        &mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["bash", "run.sh"]),
        std::time::Duration::from_secs(60),
    );
    for key in ["sh", "direct", "python"] {
        r.assert_failed(key);
    }
    assert!(
        !r.stdout.contains("script-ran"),
        "a denied script ran:\n{}",
        r.stdout
    );
    assert!(
        r.stderr
            .matches("rule deny-network-clients denied exec of")
            .count()
            >= 3,
        "{}",
        r.stderr
    );
    // A script no rule names runs.
    assert!(r.stdout.contains("build-ran"), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.value("other"), "0", "{}", r.stderr);
}

#[test]
fn a_known_script_run_by_its_file_name_or_through_its_interpreter_is_that_program() {
    // Found by a red-team pass on 2026-12-07: `npm` is a symlink to `npm-cli.js`, and both
    // `npm-cli.js publish` and `node npm-cli.js publish` published under `ci-locked` (the
    // file's own name, and the interpreter's program file, were matched by name only).
    let e = super::support::ExecEnv::new();
    e.write(
        "package.json",
        r#"{"name":"bridle-test-package","version":"1.0.0"}"#,
    );
    let npm = std::process::Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v npm)\""])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .expect("run sh");
    let npm = String::from_utf8_lossy(&npm.stdout).trim().to_owned();
    assert!(
        npm.ends_with(".js"),
        "npm is needed for this test, as a symlink to its script (`{npm}`)"
    );
    for line in [
        format!("{npm} publish --dry-run"),
        format!("node {npm} publish --dry-run"),
        // A node option taking the next word, npm's prefixes of a command and its single-dash
        // options taking a value (a red-team pass, later on 2026-12-07).
        format!("node --disable-warning DEP0040 {npm} publish --dry-run"),
        "npm pub --dry-run".to_owned(),
        // node called by another name (a fifth red-team pass).
        format!("(exec -a foo node {npm} publish --dry-run)"),
        format!("echo > e.js; node -r {npm} ./e.js publish --dry-run"),
        format!("echo > e.js; NODE_OPTIONS='--require {npm}' node ./e.js publish --dry-run"),
        "npm -tag beta publish --dry-run".to_owned(),
        // A preload behind another option's value, in quotes, in an `--env-file`, without its
        // `.js` (a sixth red-team pass).
        format!("echo > e.js; node --title x -r {npm} ./e.js publish --dry-run"),
        format!("echo > e.js; NODE_OPTIONS='--require \"{npm}\"' node ./e.js publish --dry-run"),
        format!(
            "echo > e.js; echo 'NODE_OPTIONS=\"--require {npm}\"' > envf; \
             node --env-file=envf ./e.js publish --dry-run"
        ),
        format!(
            "echo > e.js; node -r {} ./e.js publish --dry-run",
            npm.trim_end_matches(".js")
        ),
        // An `--import` URL, a name node looks up on NODE_PATH, an env file with carriage
        // returns and a comment (a seventh red-team pass).
        format!("echo > e.js; node --import file://{npm}?x ./e.js publish --dry-run"),
        format!(
            "echo > e.js; NODE_PATH={} node -r npm-cli ./e.js publish --dry-run",
            std::path::Path::new(&npm).parent().unwrap().display()
        ),
        format!(
            "echo > e.js; printf 'NODE_\\rOPTIONS=--require {npm}#x\\r\\n' > envf; \
             node --env-file=envf ./e.js publish --dry-run"
        ),
        // `..` node resolves in the text, and a NODE_PATH an env file sets (review of the
        // seventh pass's fixes).
        format!("echo > e.js; node -r /nope/..{npm} ./e.js publish --dry-run"),
        format!(
            "echo > e.js; printf 'NODE_PATH={}\\nNODE_OPTIONS=-r npm-cli\\n' > envp; \
             node --env-file=envp ./e.js publish --dry-run",
            std::path::Path::new(&npm).parent().unwrap().display()
        ),
    ] {
        let r = super::exec_rules_programs::script_under_ci_locked(&e, &line);
        assert!(
            r.stderr
                .contains("bridle: rule deny-package-publish denied exec of"),
            "{line}: not denied by the rule:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        assert!(!r.stdout.contains("Publishing") && !r.stderr.contains("Publishing"));
    }
    // npm's other commands still run.
    let r = run_within(
        &mut e.exec_cmd(
            &["--profile", "ci-locked"],
            &[],
            &["bash", "-c", &format!("node {npm} --version")],
        ),
        std::time::Duration::from_secs(120),
    );
    assert!(
        r.stdout.trim().starts_with(|c: char| c.is_ascii_digit()),
        "{}",
        r.stderr
    );
}

/// Compiles into the workspace, as `output`, a static program without libc that prints
/// `marker` and exits 0: a program that runs as another file's interpreter without relocation
/// (as a static Go binary does). Position-independent, so the kernel maps it above the program
/// that names it: last in `/proc/PID/maps`.
fn static_marker(e: &ExecEnv, output: &str, marker: &str) {
    let source = e.outside_file(
        &format!("{}.c", output.replace('/', "_")),
        &format!(
            r#"#include <sys/syscall.h>
static long call3(long n, long a, long b, long c) {{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}}
void _start(void) {{
    static const char m[] = "{marker}\n";
    call3(SYS_write, 1, (long)m, sizeof m - 1);
    call3(SYS_exit_group, 0, 0, 0);
    for (;;) {{}}
}}
"#
        ),
    );
    e.compile_c(
        &source,
        output,
        &[
            "-O2",
            "-static-pie",
            "-fPIE",
            "-nostdlib",
            "-fno-stack-protector",
        ],
    );
}

/// A profile that extends `ci-locked` and denies `forbidden`; its path.
fn denying_forbidden(e: &ExecEnv) -> String {
    e.profile(
        "forbidden.yaml",
        "extends: ci-locked\nrules:\n  commands:\n    - id: deny-forbidden\n      prefix: [forbidden]\n      decision: deny\n      examples: [forbidden]\n",
    )
}

/// `bridle exec` of the workspace's script `name` (made executable) with the workspace's
/// `bin` first on `PATH` (the session resolves the rules' programs there).
fn run_with_bin(e: &ExecEnv, profile: &str, exec_opts: &[&str], name: &str) -> super::support::Run {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        e.workspace.join(name),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let mut cmd = e.exec_cmd(&["--profile", profile], exec_opts, &[&format!("./{name}")]);
    cmd.env(
        "PATH",
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            path_str(&e.workspace.join("bin"))
        ),
    );
    run_within(&mut cmd, std::time::Duration::from_secs(120))
}

#[test]
fn an_interpreter_renamed_over_during_its_exec_is_decided_as_the_file_that_ran() {
    // Found by review on 2026-12-08: the interpreter was checked at the path the maps show and
    // then opened again there for its digest; a rename in between decided another file (a
    // quarter of 400 tries ran the denied program). It is opened once now.
    let e = ExecEnv::new();
    std::fs::create_dir_all(e.workspace.join("bin")).unwrap();
    static_marker(&e, "bin/forbidden", "FORBIDDEN RAN");
    static_marker(&e, "harmless", "HARMLESS RAN");
    // A copy: known by its digest, read at the exec event.
    std::fs::copy(
        e.workspace.join("bin/forbidden"),
        e.workspace.join("interp"),
    )
    .unwrap();
    let main = e.outside_file("tiny.c", "int main(void) { return 7; }\n");
    e.compile_c(
        &main,
        "tiny",
        &[&format!(
            "-Wl,--dynamic-linker={}",
            path_str(&e.workspace.join("interp"))
        )],
    );
    e.write(
        "race.sh",
        r#"#!/bin/sh
python3 - <<'PY' &
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
while True:
    libc.renameat2(-100, b"interp", -100, b"harmless", 2)
PY
flipper=$!
i=0
while [ $i -lt 300 ]; do ./tiny; i=$((i + 1)); done
kill $flipper
echo end=1
"#,
    );
    // Confined, and under `danger-full-access` (the whole tree traced).
    let profile = denying_forbidden(&e);
    for opts in [&[][..], &["--mode", "danger-full-access"][..]] {
        let r = run_with_bin(&e, &profile, opts, "race.sh");
        let shown = format!("{opts:?}\n{}\n{}", r.stdout, r.stderr);
        assert_eq!(r.value("end"), "1", "{shown}");
        assert_eq!(r.stdout.matches("FORBIDDEN RAN").count(), 0, "{shown}");
        // Both files were loaded by some exec: the race was run.
        assert!(r.stdout.contains("HARMLESS RAN"), "{shown}");
        assert!(
            r.stderr.contains("rule deny-forbidden denied exec of")
                || r.stderr.contains("not the file of that name"),
            "{shown}"
        );
    }
}

#[test]
fn a_denied_program_named_as_another_files_interpreter_is_that_program() {
    // Found by an eleventh red-team pass on 2026-12-08: the kernel starts the program
    // interpreter a file's `PT_INTERP` names instead of the file, under the file's name; a
    // static program (a Go binary, say) runs so without relocation, and ran past its rule.
    let e = ExecEnv::new();
    std::fs::create_dir_all(e.workspace.join("bin")).unwrap();
    static_marker(&e, "bin/forbidden", "FORBIDDEN RAN");
    let main = e.outside_file("tiny.c", "int main(void) { return 7; }\n");
    let absolute = e.workspace.join("bin/forbidden");
    e.compile_c(
        &main,
        "tiny",
        &[&format!("-Wl,--dynamic-linker={}", path_str(&absolute))],
    );
    // A relative interpreter is opened from the caller's working directory.
    e.compile_c(
        &main,
        "tiny-relative",
        &["-Wl,--dynamic-linker=bin/forbidden"],
    );
    // A file the rules know by name (a `cargo` on `PATH`, in the table from the session's
    // start), called by that name: its interpreter still runs (a twelfth red-team pass).
    e.compile_c(
        &main,
        "bin/cargo",
        &[&format!("-Wl,--dynamic-linker={}", path_str(&absolute))],
    );
    // An interpreter whose mappings come late in `/proc/PID/maps` (a long path: the file is
    // read in more than one read; found by review).
    let long = e
        .workspace
        .join(vec!["d".repeat(250); 15].join("/"))
        .join("forbidden");
    std::fs::create_dir_all(long.parent().unwrap()).unwrap();
    std::fs::copy(&absolute, &long).unwrap();
    e.compile_c(
        &main,
        "tiny-long",
        &[&format!("-Wl,--dynamic-linker={}", path_str(&long))],
    );
    // A path that names another file for the process than for its tracer (`/proc/self` is
    // the process; a thirteenth red-team pass ran it so under `danger-full-access`): the
    // process's working directory has a copy of the denied program, bridle's a harmless one.
    e.compile_c(
        &main,
        "tiny-self",
        &["-Wl,--dynamic-linker=/proc/self/cwd/i/interp"],
    );
    std::fs::create_dir_all(e.workspace.join("sub/i")).unwrap();
    std::fs::create_dir_all(e.workspace.join("i")).unwrap();
    std::fs::copy(&absolute, e.workspace.join("sub/i/interp")).unwrap();
    static_marker(&e, "i/interp", "HARMLESS RAN");
    let profile = denying_forbidden(&e);
    // A script file: its text is not the rules' to read (under `danger-full-access` a hidden
    // word would ask).
    e.write(
        "run.sh",
        "#!/bin/sh\n./tiny; echo tiny=$?; ./tiny-relative; echo relative=$?; ./tiny-long; echo long=$?; cargo build; echo named=$?; (cd sub && ../tiny-self); echo self=$?; forbidden; echo own=$?\n",
    );
    let run = |profile: &str, exec_opts: &[&str]| run_with_bin(&e, profile, exec_opts, "run.sh");
    // Without a rule naming it, the program runs by each route (the test's own check).
    let r = run("ci-locked", &[]);
    assert_eq!(
        r.stdout.matches("FORBIDDEN RAN").count(),
        6,
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    // Confined, and under `danger-full-access`, where the launcher traces the whole tree
    // (there the program itself is killed at its exec event too).
    for (opts, own) in [
        (&[][..], "126"),
        (&["--mode", "danger-full-access"][..], "137"),
    ] {
        let r = run(&profile, opts);
        let shown = format!("{opts:?}\n{}\n{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains("FORBIDDEN RAN"), "{shown}");
        assert_eq!(r.value("tiny"), "137", "{shown}");
        assert_eq!(r.value("relative"), "137", "{shown}");
        assert_eq!(r.value("long"), "137", "{shown}");
        assert_eq!(r.value("named"), "137", "{shown}");
        assert_eq!(r.value("self"), "137", "{shown}");
        assert_eq!(r.value("own"), own, "{shown}");
        for file in ["tiny", "tiny-relative", "tiny-long", "bin/cargo"] {
            assert!(
                r.stderr.contains(&format!(
                    "rule deny-forbidden denied exec of {}",
                    path_str(&e.workspace.join(file))
                )),
                "{file}: {shown}"
            );
        }
    }
}
