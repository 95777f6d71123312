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
 *     MODE 2: notification, seize, CONTINUE, exec event, detach, in one loop on poll
 *             (bridle's supervisor until it became a process of threads)
 *     MODE 3: the same per exec from a pool of threads, each blocking in
 *             SECCOMP_IOCTL_NOTIF_RECV and then in waitid for the exec event of the thread
 *             it seized (what bridle's supervisor does now; POOL=N threads, 6 by default)
 *     SYNC 1: the listener has SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6)
 * Prints: the median and 10th percentile of one fork + exec + wait (us), the children's CPU
 * per exec and the supervisor's CPU per exec (us). With N 0 it runs COMMAND (and everything
 * it starts) under the filter instead, and prints the supervisor's CPU in all (us): the
 * mechanism's floor for a whole build. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
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

/* MODE 3: a thread of the pool. Every thread blocks at the listener; one that seized the
 * caller waits for that thread's exec event (or exit) itself, on its own tracees only. The
 * command (the first exec) is not seized: the main thread is its parent and waits for it. */
static int pool_listener;
static pid_t pool_command;
static void *pool_thread(void *unused) {
    (void)unused;
    for (;;) {
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);
        if (ioctl(pool_listener, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
            if (errno == EINTR || errno == ENOENT) continue;
            return 0;
        }
        int seized = req.pid != (__u32)pool_command &&
                     ptrace(PTRACE_SEIZE, req.pid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL) == 0;
        struct seccomp_notif_resp resp = {req.id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE};
        ioctl(pool_listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        while (seized) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, req.pid, &si, WSTOPPED | WEXITED | __WALL | __WNOTHREAD) != 0) {
                if (errno == EINTR) continue;
                break;
            }
            if (si.si_code != CLD_TRAPPED) break; /* exited or killed */
            if (si.si_status == (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) {
                ptrace(PTRACE_DETACH, req.pid, 0, 0);
                break;
            }
            int sig = si.si_status & 0xff;
            ptrace(PTRACE_CONT, req.pid, 0, (sig == SIGTRAP || (si.si_status >> 8)) ? 0 : sig);
        }
    }
}

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 2, sync = argc > 2 ? atoi(argv[2]) : 0;
    int n = argc > 3 ? atoi(argv[3]) : 2000;
    if ((n <= 0 && argc < 5) || mode < 0 || mode > 3) {
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
    if (mode == 3) {
        pool_listener = l, pool_command = loop;
        int threads = getenv("POOL") ? atoi(getenv("POOL")) : 6;
        for (int i = 0; i < threads; i++) {
            pthread_t t;
            pthread_create(&t, 0, pool_thread, 0);
        }
        int st;
        while (waitpid(loop, &st, __WALL | __WNOTHREAD) != loop) {}
        printf("%.1f\n", (cpu_us(RUSAGE_SELF) - before) / (n ? n : 1));
        return !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    for (int done = 0; !done;) {
        struct pollfd fds[2] = {{sfd, POLLIN, 0}, {l, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) continue;
        if (fds[1].revents & POLLIN) {
            struct seccomp_notif req;
            memset(&req, 0, sizeof req);
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0) {
                if (mode == 2) ptrace(PTRACE_SEIZE, req.pid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL);
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
    return failed;
}
