/* The floor of the exec supervisor's mechanism (issue 9): what seccomp user notification plus
 * the ptrace attach around each exec cost on this machine with no work done at all. A minimal
 * supervisor (this process) holds the listener of a filter that notifies on execve, and for
 * each exec: poll (listener + signalfd), SECCOMP_IOCTL_NOTIF_RECV, PTRACE_SEIZE (exec event and
 * EXITKILL), SECCOMP_IOCTL_NOTIF_SEND with CONTINUE, then at the exec event wait4 and
 * PTRACE_DETACH: the same syscalls and wake-ups as bridle's supervisor, without reading or
 * deciding anything. Its child times fork + exec + wait of /bin/true N times.
 *
 *   exec_floor MODE SYNC N
 *   exec_floor MODE SYNC 0 COMMAND [ARG...]
 *     MODE 0: the filter allows execve (no supervisor work: the baseline)
 *     MODE 1: notification and CONTINUE only
 *     MODE 2: notification, seize, CONTINUE, exec event, detach (what bridle does)
 *     MODE 3: notification, then the checks a decision at the notification alone would need
 *             to be race-free (one thread, a vfork parent sharing the memory single-threaded
 *             too, the path and argv in private anonymous memory: /proc/PID/stat, kcmp,
 *             process_vm_readv, PROCMAP_QUERY), CONTINUE without the exec event where they
 *             hold, as MODE 2 where not
 *     SYNC 1: the listener has SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6)
 * Prints: the median and 10th percentile of one fork + exec + wait (us), the children's CPU
 * per exec and the supervisor's CPU per exec (us). With N 0 it runs COMMAND (and everything
 * it starts) under the filter instead, and prints the supervisor's CPU in all (us): the
 * mechanism's floor for a whole build. MODE 3 also prints, on stderr, how many execs passed
 * those checks and what each check took on average (us). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static double cpu_us(int who) {
    struct rusage r;
    getrusage(who, &r);
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}
/* PROCMAP_QUERY (Linux 6.11, <linux/fs.h>): the mapping that holds an address. */
struct procmap_query {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size;
    uint64_t vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_SHARED 0x08

static long passed, failed_checks;
static double took_stat, took_kcmp, took_read, took_open, took_query;

/* The thread count and parent of pid, from /proc/PID/stat. */
static int threads_and_parent(pid_t pid, int *threads, int *parent) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return -1;
    buf[r] = 0;
    char *after = strrchr(buf, ')'), state;
    long skip;
    /* state ppid, then 15 fields, then num_threads (field 20) */
    if (!after || sscanf(after + 2, "%c %d %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %d",
                         &state, parent, &skip, &skip, &skip, &skip, &skip, &skip, &skip, &skip,
                         &skip, &skip, &skip, &skip, &skip, &skip, &skip, threads) != 18)
        return -1;
    return 0;
}
/* Whether addr lies in private anonymous memory; [lo, hi) caches the last mapping found. */
static int private_anonymous(int maps, uint64_t addr, uint64_t *lo, uint64_t *hi) {
    if (addr >= *lo && addr < *hi) return 1;
    struct procmap_query q = {0};
    q.size = sizeof q, q.query_addr = addr;
    if (ioctl(maps, PROCMAP_QUERY, &q) < 0) return 0;
    if (q.inode || q.dev_major || q.dev_minor || (q.vma_flags & PROCMAP_QUERY_VMA_SHARED)) return 0;
    *lo = q.vma_start, *hi = q.vma_end;
    return 1;
}
/* The checks of MODE 3 (only the strings' first bytes are checked: a floor, not a proof). */
static int decidable_at_notification(const struct seccomp_notif *req) {
    pid_t pid = req->pid;
    int threads, parent;
    double t = now_us();
    int ok = threads_and_parent(pid, &threads, &parent) == 0 && threads == 1;
    took_stat += now_us() - t;
    t = now_us();
    int shared = ok && syscall(SYS_kcmp, pid, parent, KCMP_VM, 0, 0) == 0;
    took_kcmp += now_us() - t;
    if (shared) {
        int parent_threads, grandparent;
        ok = threads_and_parent(parent, &parent_threads, &grandparent) == 0 && parent_threads == 1;
    }
    char path[4096], arg[256];
    uint64_t argv[64] = {0};
    t = now_us();
    struct iovec lp = {path, sizeof path}, rp = {(void *)req->data.args[0], sizeof path};
    struct iovec la = {argv, sizeof argv}, ra = {(void *)req->data.args[1], sizeof argv};
    if (ok && (process_vm_readv(pid, &lp, 1, &rp, 1, 0) < 0 || process_vm_readv(pid, &la, 1, &ra, 1, 0) < 0))
        ok = 0;
    took_read += now_us() - t;
    char maps_path[64];
    snprintf(maps_path, sizeof maps_path, "/proc/%d/maps", pid);
    t = now_us();
    int maps = ok ? open(maps_path, O_RDONLY | O_CLOEXEC) : -1;
    took_open += now_us() - t;
    t = now_us();
    uint64_t lo = 0, hi = 0;
    ok = maps >= 0 && private_anonymous(maps, req->data.args[0], &lo, &hi) &&
         private_anonymous(maps, req->data.args[1], &lo, &hi);
    for (int i = 0; ok && i < 64 && argv[i]; i++) {
        struct iovec l = {arg, sizeof arg}, r = {(void *)argv[i], sizeof arg};
        ok = private_anonymous(maps, argv[i], &lo, &hi) && process_vm_readv(pid, &l, 1, &r, 1, 0) > 0;
    }
    if (maps >= 0) close(maps);
    took_query += now_us() - t;
    ok ? passed++ : failed_checks++;
    return ok;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void send_fd(int sock, int fd) {
    char c = 0, buf[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&c, 1};
    struct msghdr m = {0};
    memset(buf, 0, sizeof buf);
    m.msg_iov = &io, m.msg_iovlen = 1, m.msg_control = buf, m.msg_controllen = sizeof buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    if (sendmsg(sock, &m, 0) < 0) exit(2);
}
static int recv_fd(int sock) {
    char c, buf[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&c, 1};
    struct msghdr m = {0};
    int fd;
    m.msg_iov = &io, m.msg_iovlen = 1, m.msg_control = buf, m.msg_controllen = sizeof buf;
    if (recvmsg(sock, &m, 0) <= 0) exit(2);
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
    return fd;
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 2, sync = argc > 2 ? atoi(argv[2]) : 0;
    int n = argc > 3 ? atoi(argv[3]) : 2000;
    if (n <= 0 && argc < 5) {
        fprintf(stderr, "usage: exec_floor MODE SYNC N | exec_floor MODE SYNC 0 COMMAND [ARG...]\n");
        return 2;
    }
    int failed = 0;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp)) return 2;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, 0);
    int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    pid_t loop = fork();
    if (loop == 0) {
        sigprocmask(SIG_UNBLOCK, &chld, 0);
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_execve, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, mode ? SECCOMP_RET_USER_NOTIF : SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {4, f};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int l = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        if (l < 0) return 2;
        send_fd(sp[0], l);
        close(l);
        char go;
        if (read(sp[0], &go, 1) != 1) return 2;
        if (n == 0) {
            execvp(argv[4], argv + 4);
            _exit(127);
        }
        double *t = malloc(sizeof(double) * n);
        for (int i = 0; i < n; i++) {
            double start = now_us();
            pid_t c = fork();
            if (c == 0) {
                execl("/bin/true", "true", (char *)0);
                _exit(127);
            }
            int status;
            waitpid(c, &status, 0);
            t[i] = now_us() - start;
        }
        qsort(t, n, sizeof(double), cmp);
        printf("%.1f %.1f %.1f ", t[n / 2], t[n / 10], cpu_us(RUSAGE_CHILDREN) / n);
        fflush(stdout);
        _exit(0);
    }
    int l = recv_fd(sp[1]);
    if (sync && ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, 1UL) < 0) perror("SECCOMP_IOCTL_NOTIF_SET_FLAGS");
    if (write(sp[1], "g", 1) != 1) return 2;
    double before = cpu_us(RUSAGE_SELF);
    for (int done = 0; !done;) {
        struct pollfd fds[2] = {{sfd, POLLIN, 0}, {l, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) continue;
        if (fds[1].revents & POLLIN) {
            struct seccomp_notif req;
            memset(&req, 0, sizeof req);
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0) {
                int seize = mode == 2 || (mode == 3 && !decidable_at_notification(&req));
                if (seize) ptrace(PTRACE_SEIZE, req.pid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
                struct seccomp_notif_resp resp = {req.id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE};
                ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &resp);
            }
        }
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo info[8];
            if (read(sfd, info, sizeof info) < 0) continue;
            for (;;) {
                int st;
                pid_t w = waitpid(-1, &st, WNOHANG | __WALL);
                if (w <= 0) break;
                if (w == loop && (WIFEXITED(st) || WIFSIGNALED(st))) {
                    failed = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
                    done = 1;
                    break;
                }
                if (WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXEC << 8)))
                    ptrace(PTRACE_DETACH, w, 0, 0);
                else if (WIFSTOPPED(st))
                    ptrace(PTRACE_CONT, w, 0, WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st));
            }
        }
    }
    printf("%.1f\n", (cpu_us(RUSAGE_SELF) - before) / (n ? n : 1));
    double checked = passed + failed_checks;
    if (mode == 3 && checked > 0)
        fprintf(stderr, "decidable at the notification: %ld of %.0f; us per exec: stat %.1f, kcmp %.1f, "
                "reads %.1f, maps open %.1f, queries %.1f\n", passed, checked, took_stat / checked,
                took_kcmp / checked, took_read / checked, took_open / checked, took_query / checked);
    return failed;
}
