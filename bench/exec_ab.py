#!/usr/bin/env python3
"""Two builds of bridle side by side under command rules (issue 9), in rotation, nothing else:
the per-exec loop of `bench/exec_rules.sh` and its `make -j2` of 200 files, each inside
`bridle exec --profile ci-locked`, for NEW and BASE, against NEW with the rules removed.
Shorter than `exec_rules.sh` (no spawn, no floor), for comparing a change with its base.

    python3 bench/exec_ab.py NEW BASE [LOOPS] [MAKES]

LOOPS runs of 400 fork + exec + wait of /bin/true per variant (default 60), MAKES builds per
variant (default 16). Prints medians and paired medians (each run against the run without
rules next to it in the same rotation). Needs cc and make."""
import os, statistics, subprocess, sys, tempfile, time

new, base = sys.argv[1], sys.argv[2]
loops = int(sys.argv[3]) if len(sys.argv) > 3 else 60
makes = int(sys.argv[4]) if len(sys.argv) > 4 else 16
repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

work = tempfile.mkdtemp(prefix="bridle-exec-ab.", dir="/var/tmp")
ws = os.path.join(work, "ws")
os.makedirs(os.path.join(ws, "proj"))
# The same loop program as exec_rules.sh, taken from it.
src = open(os.path.join(repo, "bench", "exec_rules.sh")).read()
loop_c = src.split("cat > execloop.c <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
open(os.path.join(ws, "execloop.c"), "w").write(loop_c + "\n")
subprocess.run(["cc", "-O2", "-o", "execloop", "execloop.c"], cwd=ws, check=True)
subprocess.run(["git", "init", "-q", "."], cwd=ws, check=True)
open(os.path.join(ws, "norules.yaml"), "w").write(
    "description: ci-locked without command rules (benchmark baseline)\n"
    "extends: ci-locked\nrules:\n  commands: {replace: []}\n")
for i in range(1, 201):
    open(os.path.join(ws, "proj", f"f{i}.c"), "w").write(
        f"int f{i}(int x) {{ int s = 0; for (int i = 0; i < x; i++) s += i * {i}; return s; }}\n")
open(os.path.join(ws, "proj", "main.c"), "w").write("int main(void) { return 0; }\n")
open(os.path.join(ws, "proj", "Makefile"), "w").write(
    "OBJS := $(patsubst %.c,%.o,$(wildcard *.c))\napp: $(OBJS)\n\tcc -o $@ $(OBJS)\n"
    "%.o: %.c\n\tcc -O1 -c -o $@ $<\nclean:\n\trm -f *.o app\n")

variants = {"norules": (new, "./norules.yaml"), "new": (new, "ci-locked"), "base": (base, "ci-locked")}
build = ("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; "
         "cd proj && make clean >/dev/null && make -j2 >/dev/null")

def inside(variant, *argv):
    binary, profile = variants[variant]
    r = subprocess.run([binary, "exec", "--profile", profile, "--", *argv],
                       capture_output=True, text=True, cwd=ws)
    if r.returncode != 0:
        sys.exit(f"{variant}: {argv}: exit {r.returncode}\n{r.stderr}")
    return r.stdout

def rotation(i):
    keys = list(variants)
    return keys[i % 3:] + keys[:i % 3]

for v in variants:  # warm-up
    inside(v, "./execloop", "200")
loop = {v: [] for v in variants}
p10 = {v: [] for v in variants}
cpu = {v: [] for v in variants}
made = {v: [] for v in variants}
for i in range(loops):
    for v in rotation(i):
        median, tenth, supervisor, *_ = map(float, inside(v, "./execloop", "400").split())
        loop[v].append(median)
        p10[v].append(tenth)
        cpu[v].append(supervisor)
for i in range(makes):
    for v in rotation(i):
        start = time.monotonic()
        inside(v, "sh", "-c", build)
        made[v].append(time.monotonic() - start)
subprocess.run(["rm", "-rf", work])

med = statistics.median
def paired(xs, ys, op):
    return med([op(x, y) for x, y in zip(xs, ys)])
if loops:
    n = loop["norules"]
    print("per exec: no rules %.1f us; added, median / paired: new +%.1f / +%.1f us, base +%.1f / +%.1f us"
          % (med(n), med(loop["new"]) - med(n), paired(loop["new"], n, float.__sub__),
             med(loop["base"]) - med(n), paired(loop["base"], n, float.__sub__)))
    print("  10th percentile added: new +%.1f, base +%.1f us; supervisor cpu per exec: new %.1f, base %.1f us"
          % (med(p10["new"]) - med(p10["norules"]), med(p10["base"]) - med(p10["norules"]),
             med(cpu["new"]), med(cpu["base"])))
if makes:
    n = made["norules"]
    print("make -j2: no rules %.2f s; ratio, medians / paired: new %.3f / %.3f, base %.3f / %.3f"
          % (med(n), med(made["new"]) / med(n), paired(made["new"], n, float.__truediv__),
             med(made["base"]) / med(n), paired(made["base"], n, float.__truediv__)))
