#!/usr/bin/env bash
# Spawn-cost benchmark for `bridle exec`, compared side by side in one run (hyperfine, medians
# over >= 20 runs each):
#   bare `true`  |  unshare -Urnp --mount --fork true  |  bwrap (ro /, dev, proc, net, pid)
#   bridle exec -- true (workspace-write, network off)  |  bridle exec, danger-full-access
# and a workload ratio: 200 x `git status` bare vs inside one `bridle exec`.
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

loop='for i in $(seq 1 200); do git status --porcelain >/dev/null; done'
hyperfine --warmup 1 --runs "${WORKLOAD_RUNS:-5}" --export-json "$work/workload.json" \
  -n git-bare "sh -c '$loop'" \
  -n git-bridle "$BRIDLE exec -- sh -c '$loop'"

python3 - "$out" "$work/workload.json" <<'PY'
import json, sys
spawn = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
work = {r["command"]: r for r in json.load(open(sys.argv[2]))["results"]}
med = lambda r: r["median"] * 1000
print()
print("median ms: " + ", ".join(f"{k} {med(v):.2f}" for k, v in spawn.items()))
b, bw, un = med(spawn["bridle"]), med(spawn["bwrap"]), med(spawn["unshare"])
print(f"bridle / bwrap   = {b / bw:.2f}  (target <= 0.80)")
print(f"bridle / unshare = {b / un:.2f}  (target <= 1.30)")
g = med(work["git-bridle"]) / med(work["git-bare"])
print(f"200 x git status: bare {med(work['git-bare']):.1f} ms, in bridle {med(work['git-bridle']):.1f} ms, ratio {g:.3f}  (target <= 1.05)")
PY
