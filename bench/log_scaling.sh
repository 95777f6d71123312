#!/bin/sh
# Session-log scaling (issue 11), old against new in one run:
#   bench/log_scaling.sh [BASE_REV] [ROUNDS]
# Builds the `log` bench (release) of this checkout and, when BASE_REV is given (a commit or
# branch, `main` say), of that revision in a detached worktree; builds a 100k-event and a
# 1M-event log once with this checkout's writer (kept in $LOG_SCALING_DATA, default
# /var/tmp/log-scaling-data, and reused by later runs); then measures `verify` (what
# `bridle log verify` does) and `resume` (what `bridle run --resume` loads) alternately with
# each build, ROUNDS times (default 3), each in a fresh process under /usr/bin/time.
# Prints one line per measurement (wall s, CPU s = user + sys, peak RSS MB) and the medians.
# Env: CARGO_TARGET_DIR (default target), LOG_SCALING_BASE_TARGET (default
# /var/tmp/target-log-scaling-base), LOG_SCALING_SIZES (default "100000 1000000").
set -eu
base_rev=${1:-}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
data=${LOG_SCALING_DATA:-/var/tmp/log-scaling-data}
sizes=${LOG_SCALING_SIZES:-100000 1000000}
new_target=${CARGO_TARGET_DIR:-$root/target}
base_target=${LOG_SCALING_BASE_TARGET:-/var/tmp/target-log-scaling-base}

bench_bin() {
    # The newest `log` bench executable under target dir $1.
    ls -t "$1"/release/deps/log-* 2>/dev/null | grep -v '\.d$' | head -n 1
}

if [ -n "${LOG_SCALING_NEW_BIN:-}" ]; then
    new=$LOG_SCALING_NEW_BIN
else
    echo "building the bench of $(git -C "$root" rev-parse --short HEAD) (new)" >&2
    (cd "$root" && CARGO_TARGET_DIR=$new_target cargo bench -q --no-run -p bridle-agent --bench log)
    new=$(bench_bin "$new_target")
fi
builds="new"
if [ -n "${LOG_SCALING_BASE_BIN:-}" ]; then
    base=$LOG_SCALING_BASE_BIN
    builds="base new"
elif [ -n "$base_rev" ]; then
    wt=/var/tmp/log-scaling-base-wt
    git -C "$root" worktree remove --force "$wt" 2>/dev/null || true
    git -C "$root" worktree add -q --detach "$wt" "$base_rev"
    echo "building the bench of $base_rev (base)" >&2
    (cd "$wt" && CARGO_TARGET_DIR=$base_target cargo bench -q --no-run -p bridle-agent --bench log)
    base=$(bench_bin "$base_target")
    git -C "$root" worktree remove --force "$wt"
    builds="base new"
fi

for size in $sizes; do
    if ! ls "$data/$size"/*.jsonl >/dev/null 2>&1; then
        echo "building the $size-event log in $data/$size" >&2
        mkdir -p "$data"
        BRIDLE_LOG_BENCH_KEEP=$data BRIDLE_LOG_BENCH_SIZES=$size BRIDLE_LOG_BENCH_BUILD_ONLY=1 "$new" >&2
    fi
done

out=$(mktemp)
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "build op events: wall s, cpu s, peak RSS MB"
for size in $sizes; do
    file=$(ls "$data/$size"/*.jsonl | head -n 1)
    id=$(basename "$file" .jsonl)
    events=$(wc -l <"$file")
    for op in verify resume; do
        i=0
        while [ "$i" -lt "$rounds" ]; do
            for b in $builds; do
                eval bin=\$$b
                /usr/bin/time -f "$b $op $events %e %U %S %M" -o "$out.one" \
                    "$bin" --measure "$op" "$data/$size" "$id" "$events" >/dev/null
                awk '{printf "%s %s %s: %.2f s, %.2f s, %.1f MB\n", $1, $2, $3, $4, $5 + $6, $7 / 1024}' "$out.one"
                cat "$out.one" >>"$out"
            done
            i=$((i + 1))
        done
    done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "medians (build op events: wall s, cpu s, peak RSS MB):"
# Medians of each column (the RSS is the largest), per build, operation and size.
cut -d' ' -f1-3 "$out" | sort -u | while read -r b op events; do
    grep "^$b $op $events " "$out" >"$out.k"
    n=$(wc -l <"$out.k")
    mid=$(((n + 1) / 2))
    wall=$(awk '{print $4}' "$out.k" | sort -n | sed -n "${mid}p")
    cpu=$(awk '{print $5 + $6}' "$out.k" | sort -n | sed -n "${mid}p")
    rss=$(awk '{print $7}' "$out.k" | sort -n | tail -n 1)
    awk -v k="$b $op $events" -v w="$wall" -v c="$cpu" -v r="$rss" \
        'BEGIN {printf "%s: %.2f s, %.2f s, %.1f MB\n", k, w, c, r / 1024}'
done
rm -f "$out.k"
rm -f "$out" "$out.one"
