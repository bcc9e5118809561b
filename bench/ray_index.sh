#!/usr/bin/env bash
# Batch indexing on Ray against one process (BENCHMARKS.md, "Batch indexing on Ray"): the whole
# BEIR SciFact corpus (5,183 abstracts) indexed with --dense by
#   - one `lector index add` process using every core,
#   - tools/ray_index.py with 1 shard, then 2 shards, one CPU each, on a Ray head started here,
# and prints documents/s for each and the ratio to one process. The Ray head runs in a network
# namespace with only loopback (needs root), is this script's child and is stopped by its pid.
# Usage: bash bench/ray_index.sh [LECTOR]   (default: target/release/lector, built if missing)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${LECTOR_DATA_DIR:-$repo/../shared/data}"
corpus="$data/beir/scifact/corpus.jsonl"
lector="${1:-$repo/target/release/lector}"
[ -x "$lector" ] || (cd "$repo" && cargo build --release -p lector-cli)
python="$(bash "$repo/tools/setup-ray.sh" | tail -n 1)"
"$lector" models pull embedder >/dev/null

work="$(mktemp -d)"
ns="lector-ray-bench-$$"
head_pid=""
cleanup() {
  [ -n "$head_pid" ] && kill -TERM "$head_pid" 2>/dev/null && wait "$head_pid" 2>/dev/null || true
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns"
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" "$(dirname "$python")/ray" start --head --block --num-cpus "$(nproc)" \
  --include-dashboard=false --disable-usage-stats --port=6390 --temp-dir="$work/ray" >/dev/null 2>&1 &
head_pid=$!
for _ in $(seq 60); do
  ip netns exec "$ns" "$(dirname "$python")/ray" status --address 127.0.0.1:6390 >/dev/null 2>&1 && break
  sleep 1
done

docs=$(grep -c . "$corpus")
seconds() { python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }

start=$(date +%s.%N)
"$lector" index add "$corpus" --index "$work/one" --dense >/dev/null 2>&1
one=$(seconds "$start")

ray_run() {
  local shards=$1 start
  start=$(date +%s.%N)
  ip netns exec "$ns" "$python" "$repo/tools/ray_index.py" "$corpus" --out "$work/ray-$shards" \
    --shards "$shards" --address 127.0.0.1:6390 --lector "$lector" >/dev/null 2>&1 -- --dense
  seconds "$start"
}
ray1=$(ray_run 1)
ray2=$(ray_run 2)

echo "SciFact, $docs abstracts, --dense; $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p')"
printf '| run | seconds | documents/s | vs one process |\n| --- | --: | --: | --: |\n'
for row in "one process, $(nproc) threads:$one" "Ray, 1 shard x 1 CPU:$ray1" "Ray, 2 shards x 1 CPU:$ray2"; do
  name="${row%:*}"; s="${row##*:}"
  python3 -c 'import sys; n, s, one = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]); d = int(sys.argv[4]); print(f"| {n} | {s:.1f} | {d / s:.1f} | {one / s:.2f}x |")' "$name" "$s" "$one" "$docs"
done
