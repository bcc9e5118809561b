#!/usr/bin/env bash
# The Redis store against the embedded index (BENCHMARKS.md, "The Redis store"): BEIR SciFact
# (5,183 abstracts, 300 test queries) indexed with --dense into both, then for BM25, dense and
# hybrid: nDCG@10 at the default depth (1,000 documents, as docs/retrieval.md measures), and the
# per-query retrieval latency of `eval retrieval --depth 10` (30 passages per query, one client,
# query embedding included), with the Redis/embedded latency ratio. Redis (tools/setup-redis.sh)
# runs on a free loopback port as this script's child and is stopped by its pid. Also prints
# Redis's memory and the index directory's size per passage.
# Usage: bash bench/redis_store.sh [LECTOR]   (default: target/release/lector, built if missing)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${LECTOR_DATA_DIR:-$repo/../shared/data}/beir/scifact"
lector="${1:-$repo/target/release/lector}"
[ -x "$lector" ] || (cd "$repo" && cargo build --release -p lector-cli)
launcher="$(bash "$repo/tools/setup-redis.sh" | tail -n 1)"
"$lector" models pull embedder >/dev/null

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$launcher" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

store="redis://127.0.0.1:$port/scifact"
index="$work/index"
used_memory() {
  python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n")
reply = b""
while b"used_memory:" not in reply or not reply.endswith(b"\r\n"):
    reply += s.recv(65536)
print(next(l.split(":")[1] for l in reply.decode().split("\r\n") if l.startswith("used_memory:")))
PY
}
empty="$(used_memory)"
echo "indexing SciFact with --dense into $store and $index ..." >&2
"$lector" index add "$data/corpus.jsonl" --dense --store "$store" >&2
"$lector" index add "$data/corpus.jsonl" --dense --index "$index" >&2
passages="$("$lector" index stats --index "$index" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["passages"])')"
redis_bytes=$(( $(used_memory) - empty ))
disk_bytes="$(du -sb "$index" | cut -f1)"

run() { # place mode depth -> "ndcg p50"
  "$lector" eval retrieval "$1" "$2" --queries "$data/queries.jsonl" --qrels "$data/qrels/test.tsv" \
    --k 10 --mode "$3" --depth "$4" --json 2>"$work/err" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["ndcg@10"]["mean"])' | tr -d '\n'
  printf ' %s\n' "$(sed -n 's/.*p50 \([0-9.]*\) ms.*/\1/p' "$work/err")"
}
printf '%-7s %-14s %-14s %-18s %-18s %s\n' mode "nDCG@10 index" "nDCG@10 Redis" "p50 ms index" "p50 ms Redis" "Redis/index"
for mode in bm25 dense hybrid; do
  read -r ndcg_index _ <<<"$(run --index "$index" "$mode" 1000)"
  read -r ndcg_redis _ <<<"$(run --store "$store" "$mode" 1000)"
  read -r _ ms_index <<<"$(run --index "$index" "$mode" 10)"
  read -r _ ms_redis <<<"$(run --store "$store" "$mode" 10)"
  printf '%-7s %-14.4f %-14.4f %-18s %-18s %.2f\n' "$mode" "$ndcg_index" "$ndcg_redis" "$ms_index" "$ms_redis" \
    "$(python3 -c "print($ms_redis / $ms_index)")"
done
echo "passages $passages; Redis memory $redis_bytes bytes ($(( redis_bytes / passages )) per passage); index directory $disk_bytes bytes ($(( disk_bytes / passages )) per passage)"
