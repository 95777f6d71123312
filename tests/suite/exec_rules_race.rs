//! The exec supervisor against races: a thread rewriting argv while its process execs (10,000
//! attempts, and `posix_spawn` from a process whose other thread rewrites), memory other
//! processes write, interpreter lines with odd arguments. Git under other names is in
//! [`super::exec_rules_identity`].

use super::support::{ExecEnv, run_bounded, run_within};

/// Forks `attempts` children; in each, one thread flips `word` between `neutral` and
/// `harmful` (one atomic store each) while the main thread execs `echo WORD` (mode `thread`) or
/// `posix_spawn`s it (mode `spawn`: the child shares the memory that thread writes), or first
/// fails an exec of a file that is not there and then execs (mode `seized`: the supervisor
/// holds the thread from the failed exec on, as for `execvp` searching `PATH`). In modes
/// `shared` and `file` the execing process has one thread and the word is in memory another
/// process writes: a `MAP_SHARED` page it stores into, or a private mapping of a file it
/// `pwrite`s (pages not yet copied on write show the file). In mode `leaderless` another
/// thread `posix_spawn`s once the main thread has exited (the process lives on in its threads,
/// its leader a zombie with no memory of its own). In mode `exiting` a thread writes `harmful`
/// once, after a delay that varies from attempt to attempt, and exits at once (gone from the
/// thread count, its write still in the memory); mode `exiting-path` does the same to the path
/// (a directory, `dirname WORD/`, until the thread completes it) of `echo harmful`. In mode
/// `dying-parent` the exec is a `vfork` child's whose parent dies meanwhile (killed after a
/// varying delay): the kernel then writes 0 to the parent's `clear_child_tid`, which it pointed
/// into the argument `harmfulXYZW`, leaving `harmful`. In mode `cousin` two threads each
/// `vfork` a child and the main thread execs `sleep`, which kills both threads: the children
/// share the old memory with each other and with no parent; one execs `echo WORD`, the other
/// writes `harmful` into it after a varying delay. In mode `program` a thread rewrites the path
/// of `true harmful` back and forth between `/bin/true` and `./echo-copy` (a copy of echo:
/// the rules' `echo` under another name). Each echo prints what it was given; a status line
/// per attempt says how it ended.
const RACER: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
/* Eight bytes with the NUL: each flip is one atomic store, never a torn word. */
static union { char text[8]; unsigned long long bits; } word = { "neutral" };

static void *flip(void *unused) {
    (void)unused;
    union { char text[8]; unsigned long long bits; } harmful = { "harmful" }, neutral = { "neutral" };
    for (;;) {
        __atomic_store_n(&word.bits, harmful.bits, __ATOMIC_RELAXED);
        __atomic_store_n(&word.bits, neutral.bits, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* posix_spawn of `echo WORD` once the process's main thread has exited; exits with how the
 * echo ended. */
static void *spawn_without_leader(void *path) {
    char stat[512];
    for (int tries = 0;; tries++) {
        FILE *f = fopen("/proc/self/stat", "r");
        if (!f) _exit(8);
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = 0;
        char *close = strrchr(stat, ')');
        if (close && close[1] == ' ' && close[2] == 'Z') break;
        if (tries > 100000) _exit(8);
        sched_yield();
    }
    char *args[] = {"echo", word.text, NULL};
    pid_t child;
    if (posix_spawn(&child, path, NULL, NULL, args, environ) != 0) _exit(126);
    int status;
    if (waitpid(child, &status, 0) < 0) _exit(5);
    _exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
}

/* Mode exiting: one store after a delay, then this thread alone exits. */
static volatile long delay;
static void *flip_once(void *unused) {
    (void)unused;
    union { char text[8]; unsigned long long bits; } harmful = { "harmful" };
    for (volatile long i = 0; i < delay; i++) {}
    __atomic_store_n(&word.bits, harmful.bits, __ATOMIC_RELAXED);
    syscall(SYS_exit, 0);
    return NULL;
}

/* Mode exiting-path: the path, a directory until its last name is stored (its first byte
 * last, so the path changes in one store). */
static char path[256];
static size_t dir_len;
static const char *last_name;
static void *complete_path(void *unused) {
    (void)unused;
    for (volatile long i = 0; i < delay; i++) {}
    memcpy(path + dir_len + 1, last_name + 1, strlen(last_name));
    __atomic_store_n(&path[dir_len], last_name[0], __ATOMIC_RELAXED);
    syscall(SYS_exit, 0);
    return NULL;
}

/* Mode dying-parent: a vfork child's exec whose parent is killed meanwhile; exits with how the
 * child ended (0 when the parent died before it made one). */
static char truncated[16] = "harmfulXYZW";
static int dying_parent(const char *echo) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    volatile int *ready = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ready == MAP_FAILED) return 7;
    pid_t parent = fork();
    if (parent < 0) return 3;
    if (parent == 0) {
        syscall(SYS_set_tid_address, truncated + 7);
        *ready = 1;
        pid_t child = vfork();
        if (child == 0) {
            char *args[] = {"echo", truncated, NULL};
            execve(echo, args, environ);
            _exit(126);
        }
        int status;
        waitpid(child, &status, 0);
        _exit(0);
    }
    while (!*ready) {}
    for (volatile long i = 0; i < delay; i++) {}
    kill(parent, SIGKILL);
    int code = 0;
    for (;;) {
        int status;
        pid_t w = waitpid(-1, &status, 0);
        if (w < 0) break;
        if (w != parent) code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
    return code;
}

/* Mode cousin (see above). The memory the children share: the word, argv, their stacks. No
 * wait here depends on the scheduler: every one ends once the task it waits for ran or is
 * gone (a loaded CPU can leave a child unrun for the whole life of the parent's `sleep`). */
static char *shared_mem;
static const char *cousin_echo;
static volatile int *cousins_started, *cousin_go;
static pid_t cousin_parent;
static int cousin_exec(void *unused) {
    (void)unused;
    char exe[64], now[256], before[256];
    snprintf(exe, sizeof exe, "/proc/%d/exe", cousin_parent);
    ssize_t n = readlink(exe, before, sizeof before - 1);
    if (n < 0) {
        /* Nobody waits for this child then: the writer goes, the parent execs. */
        *cousin_go = 1;
        __atomic_add_fetch(cousins_started, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_exit, 7);
    }
    before[n] = 0;
    __atomic_add_fetch(cousins_started, 1, __ATOMIC_SEQ_CST);
    /* Until the parent runs its new program, or has no program left (it ran `sleep` to its end
     * before this child looked again, or its exec failed and it exited): either way its threads
     * are gone. Waiting only for a new program hung for ever when this child was not run for
     * those 50 ms (a loaded CI machine). */
    for (;;) {
        n = readlink(exe, now, sizeof now - 1);
        if (n < 0 || (now[n] = 0, strcmp(now, before) != 0)) break;
    }
    *cousin_go = 1;
    syscall(SYS_execve, cousin_echo, (char **)(shared_mem + 8192), environ);
    syscall(SYS_exit, 126);
    return 0;
}
static int cousin_write(void *unused) {
    (void)unused;
    union { char text[8]; unsigned long long bits; } harmful = { "harmful" };
    __atomic_add_fetch(cousins_started, 1, __ATOMIC_SEQ_CST);
    while (!*cousin_go) {}
    for (volatile long i = 0; i < delay; i++) {}
    __atomic_store_n((unsigned long long *)(shared_mem + 4096), harmful.bits, __ATOMIC_RELAXED);
    syscall(SYS_exit, 0);
    return 0;
}
/* A child not made ends the parent (which waits for both to start), and sets the writer going
 * when it is the one that would have. */
static void *vfork_exec(void *unused) {
    (void)unused;
    if (clone(cousin_exec, shared_mem + (2 << 20) - 64, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL) < 0) {
        *cousin_go = 1;
        _exit(4);
    }
    return NULL;
}
static void *vfork_write(void *unused) {
    (void)unused;
    if (clone(cousin_write, shared_mem + (3 << 20) - 64, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL) < 0) _exit(4);
    return NULL;
}
/* Exits with how the echo ended (the other processes end with 0). */
static int cousins(const char *echo) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t parent = fork();
    if (parent < 0) return 3;
    if (parent == 0) {
        cousin_parent = getpid();
        cousin_echo = echo;
        shared_mem = mmap(NULL, 3 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (shared_mem == MAP_FAILED) _exit(7);
        strcpy(shared_mem + 4096, "neutral");
        strcpy(shared_mem + 8192 + 256, "echo");
        char **args = (char **)(shared_mem + 8192);
        args[0] = shared_mem + 8192 + 256;
        args[1] = shared_mem + 4096;
        args[2] = NULL;
        cousins_started = (volatile int *)(shared_mem + 12288);
        cousin_go = (volatile int *)(shared_mem + 12288 + 64);
        pthread_t a, b;
        if (pthread_create(&a, NULL, vfork_exec, NULL) || pthread_create(&b, NULL, vfork_write, NULL)) _exit(4);
        while (*cousins_started < 2) {}
        char *sleep_args[] = {"sleep", "0.05", NULL};
        execve("/bin/sleep", sleep_args, environ);
        _exit(7);
    }
    int code = 0;
    for (;;) {
        int status;
        if (waitpid(-1, &status, 0) < 0) break;
        int c = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        if (c > code) code = c;
    }
    return code;
}

/* Mode program: the path, rewritten back and forth (not atomically: a torn path names nothing,
 * and that exec fails). */
static char program[32] = "/bin/true";

static void *flip_program(void *unused) {
    (void)unused;
    for (;;) {
        memcpy(program, "./echo-copy", 12);
        memcpy(program, "/bin/true", 10);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int attempts = atoi(argv[1]);
    int spawn = strcmp(argv[2], "spawn") == 0;
    int seized = strcmp(argv[2], "seized") == 0;
    int shared = strcmp(argv[2], "shared") == 0, file = strcmp(argv[2], "file") == 0;
    int leaderless = strcmp(argv[2], "leaderless") == 0;
    int exiting = strcmp(argv[2], "exiting") == 0;
    int exiting_path = strcmp(argv[2], "exiting-path") == 0;
    int dying = strcmp(argv[2], "dying-parent") == 0;
    int cousin = strcmp(argv[2], "cousin") == 0;
    int flip_path = strcmp(argv[2], "program") == 0;
    const char *echo = argv[3];
    int refused = 0, killed = 0, ran = 0;
    for (int i = 0; i < attempts; i++) {
        fflush(stdout);
        delay = 1000 + (long)i * 7919 % 150000;
        pid_t pid = fork();
        if (pid < 0) return 3;
        if (pid == 0) {
            if (dying) _exit(dying_parent(echo));
            if (cousin) _exit(cousins(echo));
            if (flip_path) {
                pthread_t t;
                char *args[] = {"true", "harmful", NULL};
                if (pthread_create(&t, NULL, flip_program, NULL) != 0) _exit(4);
                execve(program, args, environ);
                _exit(126);
            }
            if (exiting || exiting_path) {
                pthread_t t;
                char *args[] = {"echo", exiting ? word.text : "harmful", NULL};
                if (exiting_path) {
                    last_name = strrchr(echo, '/') + 1;
                    dir_len = (size_t)(last_name - echo);
                    if (dir_len + strlen(last_name) + 1 > sizeof path) _exit(7);
                    memcpy(path, echo, dir_len);
                }
                if (pthread_create(&t, NULL, exiting ? flip_once : complete_path, NULL) != 0) _exit(4);
                execve(exiting ? echo : path, args, environ);
                _exit(126);
            }
            if (seized) {
                /* Relative, in the writable workspace: not settled at the notification. */
                char *missing[] = {"echo", "neutral", NULL};
                execve("./no-such-dir/echo", missing, environ);
            }
            if (shared || file) {
                char *page;
                int fd = -1;
                if (shared) {
                    page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
                    if (page == MAP_FAILED) _exit(7);
                    memcpy(page, "neutral", 8);
                } else {
                    fd = open("racer.page", O_RDWR | O_CREAT | O_TRUNC, 0600);
                    if (fd < 0 || pwrite(fd, "neutral", 8, 0) != 8) _exit(7);
                    page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
                    if (page == MAP_FAILED) _exit(7);
                }
                /* The flipper is flipping (and dies with this process) before the exec. */
                volatile int *started = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
                if (started == MAP_FAILED) _exit(7);
                pid_t parent = getpid();
                pid_t flipper = fork();
                if (flipper < 0) _exit(7);
                if (flipper == 0) {
                    prctl(PR_SET_PDEATHSIG, SIGKILL);
                    if (getppid() != parent) _exit(0);
                    *started = 1;
                    for (;;) {
                        if (shared) {
                            union { char text[8]; unsigned long long bits; } harmful = { "harmful" }, neutral = { "neutral" };
                            __atomic_store_n((unsigned long long *)page, harmful.bits, __ATOMIC_RELAXED);
                            __atomic_store_n((unsigned long long *)page, neutral.bits, __ATOMIC_RELAXED);
                        } else {
                            pwrite(fd, "harmful", 8, 0);
                            pwrite(fd, "neutral", 8, 0);
                        }
                    }
                }
                while (!*started) {}
                char *args[] = {"echo", page, NULL};
                execve(echo, args, environ);
                kill(flipper, SIGKILL);
                _exit(126);
            }
            pthread_t t;
            if (pthread_create(&t, NULL, flip, NULL) != 0) _exit(4);
            if (leaderless) {
                if (pthread_create(&t, NULL, spawn_without_leader, (void *)echo) != 0) _exit(4);
                pthread_exit(NULL);
            }
            char *args[] = {"echo", word.text, NULL};
            if (spawn) {
                pid_t child;
                if (posix_spawn(&child, echo, NULL, NULL, args, environ) != 0) _exit(126);
                int status;
                if (waitpid(child, &status, 0) < 0) _exit(5);
                _exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
            }
            execve(echo, args, environ);
            _exit(126);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0) return 6;
        int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        if (code == 0) ran++;
        else if (code == 126) refused++;
        else if (code == 137) killed++;
        else { printf("unexpected=%d\n", code); }
    }
    printf("ran=%d\nrefused=%d\nkilled=%d\n", ran, refused, killed);
    return 0;
}
"#;

/// Builds the racer into the workspace with the C compiler cargo links with, next to a copy
/// of echo for mode `program`.
fn build_racer(e: &ExecEnv) {
    let source = e.write("racer.c", RACER);
    e.compile_c(&source, "racer", &["-O1", "-pthread"]);
    std::fs::copy("/bin/echo", e.workspace.join("echo-copy")).unwrap();
}

/// A profile that denies `echo harmful`.
fn forbidding(e: &ExecEnv) -> String {
    e.profile(
        "forbid.yaml",
        "extends: workspace-write\nrules:\n  commands:\n    - id: deny-harmful\n      prefix: [echo, harmful]\n      decision: deny\n      examples: [\"echo harmful\"]\n      counter_examples: [\"echo neutral\"]\n",
    )
}

fn race(e: &ExecEnv, profile: &str, attempts: u32, mode: &str) -> super::support::Run {
    let r = run_within(
        &mut e.exec_cmd(
            &["--profile", profile],
            &[],
            &["./racer", &attempts.to_string(), mode, "/bin/echo"],
        ),
        std::time::Duration::from_secs(900),
    );
    r.assert_ok();
    r
}

#[test]
fn a_thread_rewriting_argv_during_exec_never_gets_a_denied_exec_to_run() {
    let e = ExecEnv::new();
    build_racer(&e);
    let profile = forbidding(&e);
    let attempts = 10_000;
    let r = race(&e, &profile, attempts, "thread");
    let count = |key: &str| r.value(key).parse::<u32>().unwrap();
    let forbidden_ran = r.stdout.lines().filter(|l| *l == "harmful").count();
    assert_eq!(forbidden_ran, 0, "a denied exec ran:\n{}", r.stdout);
    assert!(!r.stdout.contains("unexpected="), "{}", r.stdout);
    assert_eq!(count("ran") + count("refused") + count("killed"), attempts);
    // Both checks did their part: refusals at the call, and kills where the argv changed
    // between the call and the exec (the race actually happened).
    assert!(count("refused") > 0, "{}", r.stdout);
    assert!(
        count("killed") > 0,
        "the race never happened:\n{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains("rule deny-harmful denied exec of /bin/echo harmful")
            || r.stderr
                .contains("rule deny-harmful denied exec of /usr/bin/echo harmful"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_thread_whose_failed_exec_left_it_seized_is_still_decided_at_its_next_exec_event() {
    let e = ExecEnv::new();
    build_racer(&e);
    let profile = forbidding(&e);
    let attempts = 3_000;
    let r = race(&e, &profile, attempts, "seized");
    let count = |key: &str| r.value(key).parse::<u32>().unwrap();
    let forbidden_ran = r.stdout.lines().filter(|l| *l == "harmful").count();
    assert_eq!(forbidden_ran, 0, "a denied exec ran:\n{}", r.stdout);
    assert!(!r.stdout.contains("unexpected="), "{}", r.stdout);
    assert_eq!(count("ran") + count("refused") + count("killed"), attempts);
    assert!(
        count("killed") > 0,
        "the race never happened:\n{}",
        r.stdout
    );
}

#[test]
fn posix_spawn_from_a_process_whose_other_thread_rewrites_argv_is_decided_on_the_final_argv() {
    let e = ExecEnv::new();
    build_racer(&e);
    let profile = forbidding(&e);
    let attempts = 1_000;
    let r = race(&e, &profile, attempts, "spawn");
    let forbidden_ran = r.stdout.lines().filter(|l| *l == "harmful").count();
    assert_eq!(forbidden_ran, 0, "a denied exec ran:\n{}", r.stdout);
    let count = |key: &str| r.value(key).parse::<u32>().unwrap();
    assert_eq!(count("ran") + count("refused") + count("killed"), attempts);
}

/// An exec whose argv another task can write (in `mode`, see the racer) is decided at its
/// exec event, never at the notification alone: the race happens, and nothing denied runs.
fn race_decided_at_the_exec_event(mode: &str) -> super::support::Run {
    let e = ExecEnv::new();
    build_racer(&e);
    let profile = forbidding(&e);
    let attempts = 1_000;
    let r = race(&e, &profile, attempts, mode);
    let count = |key: &str| r.value(key).parse::<u32>().unwrap();
    let forbidden_ran = r.stdout.lines().filter(|l| *l == "harmful").count();
    assert_eq!(forbidden_ran, 0, "{mode}: a denied exec ran:\n{}", r.stdout);
    assert!(!r.stdout.contains("unexpected="), "{mode}: {}", r.stdout);
    assert_eq!(count("ran") + count("refused") + count("killed"), attempts);
    assert!(
        count("killed") > 0,
        "{mode}: the race never happened:\n{}",
        r.stdout
    );
    r
}

#[test]
fn posix_spawn_from_a_thread_whose_main_thread_has_exited_is_decided_at_the_exec_event() {
    race_decided_at_the_exec_event("leaderless");
}

#[test]
fn a_thread_that_rewrote_argv_and_exited_before_the_check_gets_no_denied_exec_to_run() {
    race_decided_at_the_exec_event("exiting");
}

#[test]
fn a_thread_that_completed_the_path_and_exited_before_the_check_gets_no_denied_exec_to_run() {
    race_decided_at_the_exec_event("exiting-path");
}

#[test]
fn a_vfork_parent_dying_while_its_child_execs_gets_no_denied_exec_to_run() {
    race_decided_at_the_exec_event("dying-parent");
}

#[test]
fn a_vfork_child_sharing_its_memory_with_no_parent_gets_no_denied_exec_to_run() {
    race_decided_at_the_exec_event("cousin");
}

/// `/bin/true` is a program whose path names it for good (read-only directories, an ELF file
/// with one link), which the exec event takes from the notification without looking up
/// `/proc/PID/exe` when the kernel opened that same path: a path rewritten to name a copy of a
/// denied program after the notification read it is another path to the kernel, and that
/// exec's program is looked up.
#[test]
fn a_thread_flipping_the_path_between_a_fixed_program_and_a_copy_of_a_denied_one_gets_no_denied_exec_to_run()
 {
    let r = race_decided_at_the_exec_event("program");
    assert!(r.value("ran") != "0", "/bin/true never ran:\n{}", r.stdout);
}

#[test]
fn argv_in_memory_another_process_writes_through_map_shared_is_decided_at_the_exec_event() {
    race_decided_at_the_exec_event("shared");
}

#[test]
fn argv_in_a_private_mapping_of_a_file_another_process_writes_is_decided_at_the_exec_event() {
    race_decided_at_the_exec_event("file");
}

/// Command rules take nothing away from what a program may do with its memory: the exec
/// event they rest on holds whoever shares the memory of an exec's caller, so sharing it
/// (`clone` with `CLONE_VM`), AIO, lazily freed and droppable memory, threads, `vfork` and
/// `posix_spawn` work as they do without rules.
#[test]
fn a_supervised_sandbox_leaves_memory_sharing_aio_and_lazy_freeing_alone() {
    let e = ExecEnv::new();
    let source = e.write(
        "sharing.c",
        r#"
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
extern char **environ;
static int child(void *unused) { (void)unused; return 0; }
static void *thread(void *unused) { return unused; }
static const char *said(long r) { return r < 0 ? strerror(errno) : "ok"; }
int main(void) {
    char *stack = malloc(1 << 16);
    long c = clone(child, stack + (1 << 16), CLONE_VM | SIGCHLD, NULL);
    printf("clone_vm=%s\n", said(c));
    if (c > 0) waitpid(c, NULL, 0);
    aio_context_t ctx = 0;
    printf("io_setup=%s\n", said(syscall(SYS_io_setup, 8, &ctx)));
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    printf("madv_free=%s\n", said(madvise(m, 4096, MADV_FREE)));
    printf("madv_dontneed=%s\n", said(madvise(m, 4096, MADV_DONTNEED)));
    int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
    struct iovec range = { m, 4096 };
    printf("process_madv_free=%s\n", said(syscall(SYS_process_madvise, self, &range, 1, MADV_FREE, 0)));
    printf("process_madv_cold=%s\n", said(syscall(SYS_process_madvise, self, &range, 1, MADV_COLD, 0)));
    void *droppable = mmap(NULL, 4096, PROT_READ | PROT_WRITE, 0x08 /* MAP_DROPPABLE */ | MAP_ANONYMOUS, -1, 0);
    printf("map_droppable=%s\n", droppable == MAP_FAILED ? strerror(errno) : "ok");
    pthread_t t;
    printf("thread=%s\n", pthread_create(&t, NULL, thread, NULL) == 0 ? "ok" : "failed");
    pthread_join(t, NULL);
    pid_t v = vfork();
    if (v == 0) _exit(0);
    printf("vfork=%s\n", said(v));
    waitpid(v, NULL, 0);
    pid_t s;
    char *argv[] = {"true", NULL};
    printf("posix_spawn=%s\n", posix_spawn(&s, "/bin/true", NULL, NULL, argv, environ) == 0 ? "ok" : "failed");
    waitpid(s, NULL, 0);
    return 0;
}
"#,
    );
    e.compile_c(&source, "sharing", &["-O1", "-pthread"]);
    for profile in ["ci-locked", "workspace-write"] {
        let run = run_bounded(&mut e.exec_cmd(&["--profile", profile], &[], &["./sharing"]));
        run.assert_ok();
        for key in [
            "clone_vm",
            "io_setup",
            "madv_free",
            "madv_dontneed",
            "process_madv_free",
            "process_madv_cold",
            "map_droppable",
            "thread",
            "vfork",
            "posix_spawn",
        ] {
            assert_eq!(
                run.value(key),
                "ok",
                "{key} under {profile}: {}",
                run.stdout
            );
        }
    }
}

#[test]
fn an_interpreter_line_is_decided_on_the_argv_that_runs_however_odd_its_arguments() {
    // The exec of a script is allowed at its notification (a text file called by its own
    // name) and runs `/bin/echo` with the interpreter line's word: only the exec event sees
    // that argv, which it reads from the new stack. Odd arguments (empty ones, bytes that are
    // not UTF-8, 100,000 of them) must not make it read anything else.
    use std::os::unix::fs::PermissionsExt;
    let e = ExecEnv::new();
    let profile = forbidding(&e);
    for (name, word) in [("harmful.sh", "harmful"), ("neutral.sh", "neutral")] {
        let path = e.write(name, format!("#!/bin/echo {word}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let run = |name: &str| {
        let line = format!(
            "./{name} '' \"$(printf '\\377\\376')\" $(seq 1 100000) '' last; echo status=$?"
        );
        run_within(
            &mut e.exec_cmd(&["--profile", &profile], &[], &["bash", "-c", &line]),
            std::time::Duration::from_secs(120),
        )
    };
    let r = run("harmful.sh");
    assert_eq!(r.value("status"), "137", "{}\n{}", r.stdout, r.stderr);
    assert!(
        !r.stdout.contains("harmful"),
        "a denied exec ran:\n{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("rule deny-harmful denied exec of"),
        "{}",
        r.stderr
    );
    let r = run("neutral.sh");
    assert_eq!(r.value("status"), "0", "{}", r.stderr);
    let printed = r.stdout.lines().next().unwrap_or_default();
    let numbers: Vec<String> = (1..=100_000).map(|n| n.to_string()).collect();
    let want = format!(
        "neutral ./neutral.sh  \u{fffd}\u{fffd} {}  last",
        numbers.join(" ")
    );
    assert!(
        printed == want,
        "echo printed {} bytes, not what it was given",
        printed.len()
    );
}

#[test]
fn no_process_of_a_supervised_sandbox_can_open_another_process_memory_for_writing() {
    // What the decision at the exec event rests on: nothing but the stopped process itself
    // can write its new memory. Outside a sandbox a parent may (the control); inside, its
    // child's `/proc/PID/mem` and its own do not open for writing.
    let probe = r#"
import subprocess
p = subprocess.Popen(["sleep", "30"])
for name, path in (("child", f"/proc/{p.pid}/mem"), ("self", "/proc/self/mem")):
    try:
        open(path, "r+b")
        print(f"{name}=opened")
    except OSError as e:
        print(f"{name}={e.strerror}")
p.kill()
"#;
    let host = std::process::Command::new("python3")
        .args(["-c", probe])
        .output()
        .expect("run python3");
    assert!(
        String::from_utf8_lossy(&host.stdout).contains("child=opened"),
        "the control: {}",
        String::from_utf8_lossy(&host.stderr)
    );
    let e = ExecEnv::new();
    let r =
        run_bounded(&mut e.exec_cmd(&["--profile", "ci-locked"], &[], &["python3", "-c", probe]));
    r.assert_ok();
    assert_eq!(r.value("child"), "Permission denied", "{}", r.stderr);
    assert_eq!(r.value("self"), "Permission denied", "{}", r.stderr);
}
