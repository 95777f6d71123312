#!/usr/bin/env bash
# Spawn-cost benchmark for `bridle exec`, compared side by side in one run (hyperfine, medians
# over >= 20 runs each):
#   bare `true`  |  unshare -Urnp --mount --fork true  |  bwrap (ro /, dev, proc, net, pid)
#   bridle exec -- true (workspace-write, network off)  |  bridle exec, danger-full-access
# and a workload ratio: 200 x `git status` bare vs inside one `bridle exec` (interleaved).
# Writes bench/results/spawn.json and prints the ratios the targets are stated in.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-40}"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need hyperfine || ! need bwrap; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hyperfine bubblewrap >/dev/null
fi
cargo build --release --quiet
BRIDLE="$PWD/target/release/bridle"

work=$(mktemp -d /tmp/bridle-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws"
cd "$work/ws"
git init -q .
for i in $(seq 1 200); do echo "file $i" > "f$i.txt"; done
git add . && git -c user.name=b -c user.email=b@b commit -qm init
mkdir -p "$OLDPWD/bench/results"
out="$OLDPWD/bench/results/spawn.json"

hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$out" \
  -n bare 'true' \
  -n unshare 'unshare -Urnp --mount --fork true' \
  -n bwrap 'bwrap --ro-bind / / --dev /dev --proc /proc --unshare-net --unshare-pid --die-with-parent true' \
  -n bridle "$BRIDLE exec -- true" \
  -n bridle-danger "$BRIDLE exec --mode danger-full-access -- true"

# The workload pair is interleaved (bare, bridle, bare, bridle, ...) rather than run one after
# the other: on a shared 2-core VM the drift between two back-to-back batches is as large as the
# difference being measured.
python3 - "$out" "$BRIDLE" "${WORKLOAD_RUNS:-15}" <<'PY'
import json, statistics, subprocess, sys, time
spawn = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
bridle, rounds = sys.argv[2], int(sys.argv[3])
loop = "for i in $(seq 1 200); do git status --porcelain >/dev/null; done"
cmds = {"git-bare": ["sh", "-c", loop], "git-bridle": [bridle, "exec", "--", "sh", "-c", loop]}
times = {k: [] for k in cmds}
for k, c in cmds.items():
    subprocess.run(c, check=True)  # warm-up
for _ in range(rounds):
    for k, c in cmds.items():
        t = time.perf_counter()
        subprocess.run(c, check=True)
        times[k].append(time.perf_counter() - t)
med = lambda r: r["median"] * 1000
print()
print("median ms: " + ", ".join(f"{k} {med(v):.2f}" for k, v in spawn.items()))
b, bw, un = med(spawn["bridle"]), med(spawn["bwrap"]), med(spawn["unshare"])
print(f"bridle / bwrap   = {b / bw:.2f}  (target <= 0.80)")
print(f"bridle / unshare = {b / un:.2f}  (target <= 1.30)")
bare, inside = (statistics.median(times[k]) * 1000 for k in ("git-bare", "git-bridle"))
print(f"200 x git status ({rounds} interleaved rounds): bare {bare:.1f} ms, in bridle {inside:.1f} ms, ratio {inside / bare:.3f}  (target <= 1.05)")
PY
