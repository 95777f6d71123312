#!/usr/bin/env bash
# The exec supervisor's cost (issue 9), every comparison side by side in one run, in interleaved
# rounds (each round runs every variant once, so a change of load hits all of them alike):
#   spawn: `bridle exec -- true` with no command rules, with command rules (ci-locked), and, when
#          BRIDLE_BASE names another build of bridle (main's), that build with no rules and with
#          rules; wall time and CPU time (user + system of bridle and everything it ran);
#   per exec: inside one sandbox, a C program times fork + exec + wait of /bin/true 400 times
#          (median per exec), and the CPU time of the sandbox's init (the supervisor) and of the
#          children meanwhile, without rules and with, five such runs of each per round, paired
#          run by run;
#   floor: bench/exec_floor.c, a do-nothing supervisor with the same syscalls per exec;
#   make -j2: a C project of 200 files (200 compiler driver runs, each cc1 and as: about 600
#          programs, 1,217 execs counting the tries of PATH searches), built clean inside
#          `bridle exec`, without rules and with; and, outside bridle, under the floor's
#          do-nothing supervisor: its filter allowing every exec (the floor's baseline),
#          notifying only, notifying with the exec event (bridle's mechanism), which bounds
#          from below what any supervisor of this design costs here.
# "Without rules" is ci-locked with `rules.commands` replaced by nothing: the same sandbox, and
# no supervisor (no listener, nothing traced). The load average is recorded at the start and the end,
# and the host's steal time (on a VM: time its CPUs were given to others) over the rounds and per
# make run.
# The order of the variants rotates from round to round. Writes bench/results/exec_rules.json.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-10}"
ROUNDS="${ROUNDS:-7}"

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
cargo build --release --quiet -p bridle
BRIDLE="${CARGO_TARGET_DIR:-$PWD/target}/release/bridle"
out="$PWD/bench/results/exec_rules.json"
mkdir -p "$PWD/bench/results"

work=$(mktemp -d /tmp/bridle-bench-exec.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws"
repo=$PWD
cd "$work/ws"
git init -q .
cat > norules.yaml <<'EOF'
description: ci-locked without command rules (benchmark baseline)
extends: ci-locked
rules:
  commands: {replace: []}
EOF

# fork + exec + wait of /bin/true, N times; prints the median and the 10th percentile in
# microseconds, the CPU time the sandbox's init (the supervisor, when there is one) spent
# meanwhile, per exec (/proc/1/schedstat and the threads of the supervisor's own process,
# `bridle-execs`: on-CPU nanoseconds; less sensitive to a loaded machine than wall time), and the CPU time of the children (user + system) and of this
# program itself, per exec.
cat > execloop.c <<'EOF'
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double schedstat_ns(const char *path) {
    double ns = 0;
    FILE *f = fopen(path, "r");
    if (f) { if (fscanf(f, "%lf", &ns) != 1) ns = 0; fclose(f); }
    return ns;
}
/* On-CPU time of the supervisor: init, and every thread of the supervisor's own process
 * (`bridle-execs`) when there is one. */
static double init_ns(void) {
    double ns = schedstat_ns("/proc/1/schedstat");
    DIR *proc = opendir("/proc");
    struct dirent *p;
    char path[512], comm[64];
    while (proc && (p = readdir(proc))) {
        if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/comm", p->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int named = fgets(comm, sizeof comm, f) && strcmp(comm, "bridle-execs\n") == 0;
        fclose(f);
        if (!named) continue;
        snprintf(path, sizeof path, "/proc/%s/task", p->d_name);
        DIR *tasks = opendir(path);
        struct dirent *t;
        while (tasks && (t = readdir(tasks))) {
            if (t->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "/proc/%s/task/%s/schedstat", p->d_name, t->d_name);
            ns += schedstat_ns(path);
        }
        if (tasks) closedir(tasks);
    }
    if (proc) closedir(proc);
    return ns;
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
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    double *t = malloc(sizeof(double) * n), before = init_ns();
    double children = cpu_us(RUSAGE_CHILDREN), self = cpu_us(RUSAGE_SELF);
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", "--bench", (char *)0);
            _exit(127);
        }
        int status;
        waitpid(pid, &status, 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
        t[i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
    }
    double init_us = (init_ns() - before) / 1e3 / n;
    children = (cpu_us(RUSAGE_CHILDREN) - children) / n;
    self = (cpu_us(RUSAGE_SELF) - self) / n;
    qsort(t, n, sizeof(double), cmp);
    printf("%.1f %.1f %.2f %.2f %.2f\n", t[n / 2], t[n / 10], init_us, children, self);
    return 0;
}
EOF
cc -O2 -o execloop execloop.c
# The mechanism's floor outside bridle (see bench/exec_floor.c): a do-nothing supervisor with
# the same syscalls and wake-ups per exec.
cc -O2 -pthread -o exec_floor "$repo/bench/exec_floor.c"

mkdir -p proj
for i in $(seq 1 200); do
  printf 'int f%d(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * %d; return s; }\n' "$i" "$i" > "proj/f$i.c"
done
printf 'int main(void) { return 0; }\n' > proj/main.c
{
  echo 'OBJS := $(patsubst %.c,%.o,$(wildcard *.c))'
  echo 'app: $(OBJS)'
  printf '\tcc -o $@ $(OBJS)\n'
  echo '%.o: %.c'
  printf '\tcc -O1 -c -o $@ $<\n'
  echo 'clean:'
  printf '\trm -f *.o app\n'
} > proj/Makefile

python3 - "$BRIDLE" "${BRIDLE_BASE:-}" "$ROUNDS" "$RUNS" "$load_start" "$out" <<'PY'
import json, os, resource, statistics, subprocess, sys, time
bridle, base, rounds, runs, load_start, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
profiles = {"norules": "./norules.yaml", "rules": "ci-locked"}

def inside(profile, *argv, build=bridle):
    r = subprocess.run([build, "exec", "--profile", profile, "--", *argv],
                       capture_output=True, text=True)
    if r.returncode != 0 or "denied exec" in r.stderr:
        sys.exit(f"{profile}: {argv}: {r.returncode}\n{r.stderr}")
    return r.stdout

def cpu_ticks():
    """(steal, all) of the machine's CPU time so far, in clock ticks (`/proc/stat`): steal is
    time the host ran something else on this VM's CPUs, which slows wake-ups most."""
    fields = [int(f) for f in open("/proc/stat").readline().split()[1:9]]
    return fields[7], sum(fields)

def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime

# The rules profile really is supervised and the baseline really is not: `git push` (which
# ci-locked denies) is refused with EACCES (126) under rules only.
for name, want in (("norules", False), ("rules", True)):
    with open("push.sh", "w") as f:
        f.write("p=push; git $p 2>/dev/null; echo $?\n")
    r = subprocess.run([bridle, "exec", "--profile", profiles[name], "--", "sh", "./push.sh"],
                       capture_output=True, text=True)
    refused = r.stdout.strip() == "126"
    assert refused == want, f"{name}: git push exited {r.stdout.strip()}, supervised expected: {want}"

# fork + exec + wait: PAIRS runs of EXECS execs per variant and round.
PAIRS, EXECS = 5, 400
spawners = {k: (bridle, p) for k, p in profiles.items()}
# Inside a sandbox: this build without and with rules, and the base build with rules (without
# rules the base runs the same untraced sandbox).
insiders = dict(spawners)
if base:
    spawners.update({"base-" + k: (base, p) for k, p in profiles.items()})
    insiders["base-rules"] = (base, profiles["rules"])
spawn_wall = {k: [] for k in spawners}
spawn_cpu = {k: [] for k in spawners}
per_exec = {k: [] for k in insiders}
p10 = {k: [] for k in insiders}
init_cpu = {k: [] for k in insiders}
child_cpu = {k: [] for k in insiders}
loop_cpu = {k: [] for k in insiders}
make = {k: [] for k in insiders}
# The floor: no supervisor work (0 0), the notification answered at once (1 0: what any
# supervisor of this design costs at the least), the same syscalls as bridle's exec event path
# (2 0), and with the listener's synchronous wake-ups (2 1).
floors = {"allow": ("0", "0"), "notify": ("1", "0"), "seize": ("2", "0"), "seize-sync": ("2", "1"),
          "pool": ("3", "0")}
floor = {k: {"median": [], "p10": [], "supervisor_cpu": [], "children_cpu": []} for k in floors}
make_cpu = {k: [] for k in insiders}
# make under the floor's supervisor (outside bridle): the filter allowing every exec, notifying
# only, and with the exec event.
make_floors = {"allow": "0", "notify": "1", "seize": "2", "pool": "3"}
make_floor = {k: [] for k in make_floors}
make_steal = {k: [] for k in insiders}
# Each failed try of a PATH search is an exec the supervisor is asked about, so the build has
# Debian's default PATH, not the runner's (a cargo or pyenv shell's PATH can triple the execs).
build = ("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; "
         "cd proj && make clean >/dev/null && make -j2 >/dev/null")
for k, (b, p) in spawners.items():  # warm-up
    for _ in range(3):
        inside(p, "true", build=b)
for k, (b, p) in insiders.items():
    inside(p, "./execloop", "200", build=b)
    inside(p, "sh", "-c", build, build=b)
def rotated(d, by):
    """The items of `d`, starting at the one `by` places on (each round starts with another)."""
    items = list(d.items())
    by %= len(items)
    return items[by:] + items[:by]

run_start_ticks = cpu_ticks()
for n in range(rounds):
    for i in range(runs):
        for k, (b, p) in rotated(spawners, n * runs + i):
            cpu, start = children_cpu(), time.monotonic()
            inside(p, "true", build=b)
            spawn_wall[k].append((time.monotonic() - start) * 1000)
            spawn_cpu[k].append((children_cpu() - cpu) * 1000)
    # Short runs, alternating: the host's speed drifts between phases seconds long (the same
    # loop without rules measured 800 us per exec in one and 1,050 in the next), so a pair is
    # two runs a fraction of a second apart.
    for sub in range(PAIRS):
        for k, (b, p) in rotated(insiders, n * PAIRS + sub):
            median, tenth, init_us, child_us, self_us = map(
                float, inside(p, "./execloop", str(EXECS), build=b).split())
            per_exec[k].append(median)
            p10[k].append(tenth)
            init_cpu[k].append(init_us)
            child_cpu[k].append(child_us)
            loop_cpu[k].append(self_us)
    for k, (mode, sync) in rotated(floors, n):
        r = subprocess.run(["./exec_floor", mode, sync, "2000"], capture_output=True, text=True, check=True)
        median, tenth, child_us, sup_us = map(float, r.stdout.split())
        for f, v in (("median", median), ("p10", tenth), ("supervisor_cpu", sup_us), ("children_cpu", child_us)):
            floor[k][f].append(v)
    for k, (b, p) in rotated(insiders, n + 1):
        cpu, ticks, start = children_cpu(), cpu_ticks(), time.monotonic()
        inside(p, "sh", "-c", build, build=b)
        make[k].append(time.monotonic() - start)
        make_cpu[k].append(children_cpu() - cpu)
        after = cpu_ticks()
        make_steal[k].append((after[0] - ticks[0]) / max(1, after[1] - ticks[1]))
    for k, mode in rotated(make_floors, n):
        start = time.monotonic()
        subprocess.run(["./exec_floor", mode, "0", "0", "sh", "-c", build], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        make_floor[k].append(time.monotonic() - start)

med = lambda d: {k: statistics.median(v) for k, v in d.items()}
res = {
    "loadavg_at_start": load_start.split(),
    "spawn_ms": med(spawn_wall),
    "spawn_cpu_ms": med(spawn_cpu),
    "per_exec_us": med(per_exec),
    "per_exec_rounds_us": per_exec,
    "per_exec_p10_us": med(p10),
    "init_cpu_per_exec_us": med(init_cpu),
    "children_cpu_per_exec_us": med(child_cpu),
    "parent_cpu_per_exec_us": med(loop_cpu),
    "make_s": med(make),
    "make_cpu_s": med(make_cpu),
    "make_rounds_s": make,
}
res["floor"] = {k: {f: statistics.median(v) for f, v in d.items()} for k, d in floor.items()}
res["make_floor_s"] = med(make_floor)
res["make_floor_rounds_s"] = make_floor
res["make_floor_ratio_paired"] = {
    k: statistics.median(a / b for a, b in zip(make_floor[k], make_floor["allow"]))
    for k in ("notify", "seize", "pool")}
res["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
end_ticks = cpu_ticks()
res["steal_share"] = (end_ticks[0] - run_start_ticks[0]) / max(1, end_ticks[1] - run_start_ticks[1])
res["make_steal_share_rounds"] = make_steal
res["added_per_exec_us"] = res["per_exec_us"]["rules"] - res["per_exec_us"]["norules"]
res["added_per_exec_p10_us"] = res["per_exec_p10_us"]["rules"] - res["per_exec_p10_us"]["norules"]
res["added_cpu_per_exec_us"] = sum(
    res[f][ "rules"] - res[f]["norules"]
    for f in ("init_cpu_per_exec_us", "children_cpu_per_exec_us", "parent_cpu_per_exec_us"))
res["make_ratio"] = res["make_s"]["rules"] / res["make_s"]["norules"]
# Paired by round (each round ran every variant once, close in time; per exec, each of the
# round's short runs): less moved by a change of the host's speed than the medians.
paired = lambda d, k, f: statistics.median(f(a, b) for a, b in zip(d[k], d["norules"]))
res["added_per_exec_paired_us"] = paired(per_exec, "rules", lambda a, b: a - b)
res["make_ratio_paired"] = paired(make, "rules", lambda a, b: a / b)
res["make_ratio_over_floor"] = res["make_ratio_paired"] / res["make_floor_ratio_paired"]["pool"]
if base:
    res["base_added_per_exec_us"] = res["per_exec_us"]["base-rules"] - res["per_exec_us"]["norules"]
    res["base_make_ratio"] = res["make_s"]["base-rules"] / res["make_s"]["norules"]
    res["base_added_per_exec_paired_us"] = paired(per_exec, "base-rules", lambda a, b: a - b)
    res["base_make_ratio_paired"] = paired(make, "base-rules", lambda a, b: a / b)
json.dump(res, open(out, "w"), indent=2)
print(f"load average: {' '.join(res['loadavg_at_start'])} at the start, {' '.join(res['loadavg_at_end'])} at the end; "
      f"host steal {100 * res['steal_share']:.1f} % of the CPU time of the measured rounds")
for k in spawners:
    print(f"spawn {k:14} wall {res['spawn_ms'][k]:7.2f} ms  cpu {res['spawn_cpu_ms'][k]:6.2f} ms")
print(f"fork+exec+wait of /bin/true, median of {rounds * PAIRS} runs of {EXECS}: "
      f"no rules {res['per_exec_us']['norules']:.1f} us, rules {res['per_exec_us']['rules']:.1f} us, "
      f"added {res['added_per_exec_us']:.1f} us  (target <= 100 us); 10th percentile: added "
      f"{res['added_per_exec_p10_us']:.1f} us; paired run by run: added {res['added_per_exec_paired_us']:.1f} us")
if base:
    print(f"  the base build with rules: {res['per_exec_us']['base-rules']:.1f} us, added {res['base_added_per_exec_us']:.1f} us"
          f" (paired {res['base_added_per_exec_paired_us']:.1f} us)")
for k in insiders:
    print(f"  cpu per exec, {k:8}: init {res['init_cpu_per_exec_us'][k]:.1f} us, children "
          f"{res['children_cpu_per_exec_us'][k]:.1f} us, the loop {res['parent_cpu_per_exec_us'][k]:.1f} us")
print(f"  added cpu per exec: {res['added_cpu_per_exec_us']:.1f} us")
print(f"make -j2, 200 files, median of {rounds} rounds: no rules {res['make_s']['norules']:.2f} s, "
      f"rules {res['make_s']['rules']:.2f} s, ratio {res['make_ratio']:.3f}  (target <= 1.05); "
      f"cpu {res['make_cpu_s']['norules']:.2f} s against {res['make_cpu_s']['rules']:.2f} s; paired by round: ratio "
      f"{res['make_ratio_paired']:.3f}")
if base:
    print(f"  the base build with rules: {res['make_s']['base-rules']:.2f} s, ratio {res['base_make_ratio']:.3f}"
          f" (paired {res['base_make_ratio_paired']:.3f})")
mf = res["make_floor_ratio_paired"]
print(f"  make -j2 outside bridle under the floor's supervisor: {res['make_floor_s']['allow']:.2f} s allowing every exec; "
      f"paired ratio {mf['notify']:.3f} notifying only, {mf['seize']:.3f} with the exec event from one loop, "
      f"{mf['pool']:.3f} from a pool of threads (the mechanism's floor); "
      f"bridle's paired ratio over the floor's: {res['make_ratio_over_floor']:.3f}")
fl = res["floor"]
for k in ("notify", "seize", "seize-sync", "pool"):
    print(f"floor (bench/exec_floor.c, a do-nothing supervisor), {k:10}: added median "
          f"{fl[k]['median'] - fl['allow']['median']:.1f} us, p10 {fl[k]['p10'] - fl['allow']['p10']:.1f} us; "
          f"supervisor cpu {fl[k]['supervisor_cpu']:.1f} us, children cpu "
          f"+{fl[k]['children_cpu'] - fl['allow']['children_cpu']:.1f} us per exec")
PY
