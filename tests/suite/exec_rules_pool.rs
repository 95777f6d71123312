//! The supervisor's threads (`bridle-execs`): one follows each exec it let on until its exec
//! event, so execs that the kernel fails after the supervisor let them on (a file without the
//! execute bit) each hold a thread for as long as their process lives. When no thread is left
//! to follow another exec (256 of them, or the user's process limit, which the threads count
//! against), that exec fails with `EAGAIN`, reported, instead of waiting for ever. After a
//! burst, at most one thread per CPU waits at the listener. An exec that waits in the kernel
//! for a traced sibling thread to be reaped never waits on the supervisor's lock.

use std::time::Duration;

use super::support::{ExecEnv, process_tree, run_bounded, wait_until};

#[test]
fn execs_that_find_no_free_supervisor_thread_fail_with_eagain_instead_of_hanging() {
    let e = ExecEnv::new();
    e.write("d1/true", "not a program\n");
    let source = e.write(
        "pin.c",
        r#"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_barrier_t all_tried;
static int eagain;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *pin(void *unused) {
    (void)unused;
    char *argv[] = {"true", NULL};
    execv("d1/true", argv); /* let on, then failed by the kernel: EACCES */
    if (errno == EAGAIN) { pthread_mutex_lock(&lock); eagain++; pthread_mutex_unlock(&lock); }
    pthread_barrier_wait(&all_tried);
    pause();
    return 0;
}
int main(void) {
    enum { N = 300 };
    pthread_barrier_init(&all_tried, 0, N + 1);
    for (int i = 0; i < N; i++) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 64 * 1024);
        if (pthread_create(&t, &a, pin, 0)) { printf("threads=%d\n", i); return 1; }
    }
    pthread_barrier_wait(&all_tried);
    printf("eagain=%s\n", eagain > 0 ? "some" : "none");
    /* A PATH search whose first try needs a thread too: it fails, it does not wait. */
    pid_t child = fork();
    if (child == 0) {
        setenv("PATH", "d1:/usr/bin:/bin", 1);
        char *argv[] = {"true", NULL};
        execvp("true", argv);
        printf("search=%s\n", strerror(errno));
        fflush(stdout);
        _exit(3);
    }
    int status;
    waitpid(child, &status, 0);
    printf("child=%d\n", WEXITSTATUS(status));
    fflush(stdout);
    _exit(0); /* ends the pinned threads: the supervisor's threads are free again */
}
"#,
    );
    e.compile_c(&source, "pin", &["-pthread"]);
    // Room for 300 threads of the program and 256 of the supervisor, which share the
    // sandbox's process limit: with ci-locked's 512 whichever of the two got there first failed.
    let roomy = e.profile(
        "roomy.yaml",
        "extends: ci-locked\nlimits:\n  processes: 1024\n",
    );
    let r = run_bounded(&mut e.exec_cmd(
        &["--profile", &roomy],
        &[],
        &["sh", "-c", "./pin; /bin/echo after=$?"],
    ));
    r.assert_ok();
    assert_eq!(r.value("eagain"), "some", "{}\n{}", r.stdout, r.stderr);
    // The search ran `true` (a thread was free by then) or failed at once; it never waited.
    match r.value("child") {
        "0" => {}
        "3" => assert_eq!(r.value("search"), "Resource temporarily unavailable"),
        other => panic!("child {other}:\n{}\n{}", r.stdout, r.stderr),
    }
    // The threads came back: the next exec (echo) runs.
    assert_eq!(r.value("after"), "0", "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the exec supervisor has no thread free to follow the exec"),
        "{}",
        r.stderr
    );
}

/// What each thread of `pid` waits in (`/proc/PID/task/*/wchan`).
fn waits_of(pid: i32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("wchan")).ok())
        .collect()
}

#[test]
fn after_a_burst_of_parallel_execs_at_most_one_supervisor_thread_per_cpu_waits_at_the_listener() {
    let e = ExecEnv::new();
    let ready = e.env.workspace.join("ready");
    // 40 execs at once, each followed by a thread of its own; then the sandbox stays up.
    let mut child = e
        .exec_cmd(
            &["--profile", "ci-locked"],
            &[],
            &[
                "sh",
                "-c",
                "for i in $(seq 40); do /bin/sleep 1 & done; /bin/sleep 0.5; : > ready; wait; /bin/sleep 2",
            ],
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn bridle exec");
    assert!(
        wait_until(Duration::from_secs(30), || ready.exists()),
        "the burst never finished"
    );
    let supervisor = process_tree(i32::try_from(child.id()).expect("pid"))
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                .is_ok_and(|c| c.trim() == "bridle-execs")
        })
        .expect("a bridle-execs process in the sandbox");
    let waits = waits_of(supervisor.pid);
    let _ = child.wait();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    // A thread is at the listener or waits to be called there (a futex): nothing else.
    let listening = waits.iter().filter(|w| !w.starts_with("futex")).count();
    assert!(
        (1..=cpus.min(4)).contains(&listening),
        "{listening} threads at the listener on {cpus} CPUs: {waits:?}"
    );
    // Threads beyond 8 waiting to be called ended (but the process's main thread, which never
    // ends, may be a ninth).
    assert!(waits.len() <= listening + 9, "{waits:?}");
}

/// A thread B of a process execs a file without the execute bit (let on, failed by the kernel:
/// B stays seized), then the main thread A and another thread C exec at once. A's exec waits
/// (in `de_thread`, holding the process's exec lock) until B, killed, is reaped by the
/// supervisor thread that seized it; the thread answering C's exec meanwhile holds the
/// supervisor's lock and waits in `PTRACE_SEIZE` for that exec lock. The reap must not need
/// the supervisor's lock: with it, all three waited for ever (the build before 6f43d99 hung
/// within 3 rounds).
#[test]
fn an_exec_waiting_for_a_traced_sibling_to_be_reaped_does_not_deadlock_the_supervisor() {
    let e = ExecEnv::new();
    e.write("noexec", "not a program\n");
    let source = e.write(
        "reap.c",
        r#"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static atomic_int ready, go;
static void *b_thread(void *u) {
    (void)u;
    char *argv[] = {"noexec", NULL};
    execv("./noexec", argv); /* let on, then EACCES: this thread stays seized */
    atomic_store(&ready, 1);
    for (;;) pause();
}
static void *c_thread(void *u) {
    (void)u;
    while (!atomic_load(&go)) {}
    char *argv[] = {"true", NULL};
    execv("/bin/true", argv);
    for (;;) pause();
}
int main(void) {
    int done = 0;
    for (int i = 0; i < 200; i++) {
        pid_t p = fork();
        if (p == 0) {
            pthread_t b, c;
            pthread_create(&b, 0, b_thread, 0);
            while (!atomic_load(&ready)) {}
            pthread_create(&c, 0, c_thread, 0);
            atomic_store(&go, 1);
            char *argv[] = {"true", NULL};
            execv("/bin/true", argv);
            _exit(3);
        }
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int st = 0;
        while (waitpid(p, &st, WNOHANG) != p) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec > 10) {
                printf("hung=round %d\n", i);
                fflush(stdout);
                _exit(1);
            }
            usleep(200);
        }
        done += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    printf("done=%d\n", done);
    return 0;
}
"#,
    );
    e.compile_c(&source, "reap", &["-pthread"]);
    let r = run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["./reap"]));
    r.assert_ok();
    assert_eq!(r.value("done"), "200", "{}\n{}", r.stdout, r.stderr);
}
