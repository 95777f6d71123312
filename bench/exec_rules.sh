#!/usr/bin/env bash
# The exec supervisor's cost (issue 9), every comparison side by side in one run:
#   spawn: `bridle exec -- true` with no command rules, with command rules (ci-locked), and, when
#          BRIDLE_BASE names another build of bridle (main's), that build with no rules
#          (hyperfine medians);
#   per exec: inside one sandbox, a C program times fork + exec + wait of /bin/true 2000 times
#          (median per exec), without rules and with, interleaved rounds;
#   make -j2: a C project of 200 files (200 compiler driver runs, each cc1 and as: about 600
#          execs), built clean inside `bridle exec`, without rules and with, interleaved rounds.
# "Without rules" is ci-locked with `rules.commands` replaced by nothing: the same sandbox, and
# no supervisor (nothing is traced). Writes bench/results/exec_rules.json.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-30}"
ROUNDS="${ROUNDS:-7}"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need hyperfine; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine >/dev/null
fi
cargo build --release --quiet -p bridle
BRIDLE="${CARGO_TARGET_DIR:-$PWD/target}/release/bridle"
out="$PWD/bench/results/exec_rules.json"
mkdir -p "$PWD/bench/results"

work=$(mktemp -d /tmp/bridle-bench-exec.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws"
cd "$work/ws"
git init -q .
cat > norules.yaml <<'EOF'
description: ci-locked without command rules (benchmark baseline)
extends: ci-locked
rules:
  commands: {replace: []}
EOF

# fork + exec + wait of /bin/true, N times; prints the median and the 10th percentile in
# microseconds, and the CPU time the sandbox's init (the supervisor, when there is one) spent
# meanwhile, per exec (/proc/1/schedstat: on-CPU nanoseconds; less sensitive to a loaded
# machine than wall time).
cat > execloop.c <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double init_ns(void) {
    double ns = 0;
    FILE *f = fopen("/proc/1/schedstat", "r");
    if (f) { if (fscanf(f, "%lf", &ns) != 1) ns = 0; fclose(f); }
    return ns;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    double *t = malloc(sizeof(double) * n), before = init_ns();
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
    qsort(t, n, sizeof(double), cmp);
    printf("%.1f %.1f %.2f\n", t[n / 2], t[n / 10], init_us);
    return 0;
}
EOF
cc -O2 -o execloop execloop.c

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

base_rows=()
if [ -n "${BRIDLE_BASE:-}" ]; then
  base_rows=(-n base-norules "$BRIDLE_BASE exec --profile ./norules.yaml -- true")
fi
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$work/spawn.json" \
  -n norules "$BRIDLE exec --profile ./norules.yaml -- true" \
  -n rules "$BRIDLE exec --profile ci-locked -- true" \
  "${base_rows[@]}" >/dev/null

python3 - "$BRIDLE" "$ROUNDS" "$work/spawn.json" "$out" <<'PY'
import json, statistics, subprocess, sys, time
bridle, rounds, spawn_json, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
profiles = {"norules": "./norules.yaml", "rules": "ci-locked"}

def inside(profile, *argv):
    r = subprocess.run([bridle, "exec", "--profile", profile, "--", *argv],
                       capture_output=True, text=True)
    if r.returncode != 0 or "denied exec" in r.stderr:
        sys.exit(f"{profile}: {argv}: {r.returncode}\n{r.stderr}")
    return r.stdout

# The rules profile really is supervised and the baseline really is not.
for name, want in (("norules", "0"), ("rules", "1")):
    tracer = inside(profiles[name], "awk", "/^TracerPid/ { print $2 }", "/proc/self/status").strip()
    assert tracer == want, f"{name}: TracerPid {tracer}, expected {want}"

per_exec = {k: [] for k in profiles}
p10 = {k: [] for k in profiles}
init_cpu = {k: [] for k in profiles}
make = {k: [] for k in profiles}
build = "cd proj && make clean >/dev/null && make -j2 >/dev/null"
for k, p in profiles.items():  # warm-up
    inside(p, "./execloop", "200")
    inside(p, "sh", "-c", build)
for _ in range(rounds):
    for k, p in profiles.items():
        median, tenth, init_us = map(float, inside(p, "./execloop", "2000").split())
        per_exec[k].append(median)
        p10[k].append(tenth)
        init_cpu[k].append(init_us)
    for k, p in profiles.items():
        start = time.monotonic()
        inside(p, "sh", "-c", build)
        make[k].append(time.monotonic() - start)

spawn = {r["command"]: r for r in json.load(open(spawn_json))["results"]}
res = {
    "spawn_ms": {k: statistics.median(v["times"]) * 1000 for k, v in spawn.items()},
    "per_exec_us": {k: statistics.median(v) for k, v in per_exec.items()},
    "per_exec_rounds_us": per_exec,
    "per_exec_p10_us": {k: statistics.median(v) for k, v in p10.items()},
    "init_cpu_per_exec_us": {k: statistics.median(v) for k, v in init_cpu.items()},
    "make_s": {k: statistics.median(v) for k, v in make.items()},
    "make_rounds_s": make,
}
res["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
res["added_per_exec_us"] = res["per_exec_us"]["rules"] - res["per_exec_us"]["norules"]
res["added_per_exec_p10_us"] = res["per_exec_p10_us"]["rules"] - res["per_exec_p10_us"]["norules"]
res["make_ratio"] = res["make_s"]["rules"] / res["make_s"]["norules"]
json.dump(res, open(out, "w"), indent=2)
for k, v in res["spawn_ms"].items():
    print(f"spawn {k:14} {v:7.2f} ms")
print(f"fork+exec+wait of /bin/true, median of {rounds} rounds of 2000: "
      f"no rules {res['per_exec_us']['norules']:.1f} us, rules {res['per_exec_us']['rules']:.1f} us, "
      f"added {res['added_per_exec_us']:.1f} us  (target <= 100 us); 10th percentile: added "
      f"{res['added_per_exec_p10_us']:.1f} us; init's CPU per exec: no rules "
      f"{res['init_cpu_per_exec_us']['norules']:.1f} us, rules {res['init_cpu_per_exec_us']['rules']:.1f} us")
print(f"make -j2, 200 files, median of {rounds} rounds: no rules {res['make_s']['norules']:.2f} s, "
      f"rules {res['make_s']['rules']:.2f} s, ratio {res['make_ratio']:.3f}  (target <= 1.05)")
PY
