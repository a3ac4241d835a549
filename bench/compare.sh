#!/bin/sh
# make bench-compare: two sides of the bench/ benchmarks in one run, run
# alternately (A, B, A, B, ...) COUNT times each, so that a shared machine's
# drifting load lands on both; then benchstat prints each metric of B against
# A (README.md).
#
# Without B_ENDPOINT the sides are git revision BASE (default main) and the
# working tree: each side's own benchmarks, or, with HARNESS=tree, the
# working tree's benchmarks run against each side's `s3gate` binary
# (S3GATE_BENCH_BIN), so that an old gateway meets today's workloads and
# metrics (the issue-time gateway, say). With B_ENDPOINT (+ B_ACCESS_KEY, B_SECRET_KEY, B_REGION,
# B_CA_FILE, B_PIDS) the sides are this tree's gateway on ENGINE (default
# pgchunks) and that S3 endpoint, over the workloads of WORKLOAD (a -bench
# regexp under the engine, default all).
set -eu
BASE=${BASE:-main}
COUNT=${COUNT:-3}
BENCH=${BENCH:-Gateway}
BENCHTIME=${BENCHTIME:-1x}
GO=${GO:-go}
BENCHSTAT=${BENCHSTAT:-$($GO env GOPATH)/bin/benchstat}
B_ENDPOINT=${B_ENDPOINT:-}
HARNESS=${HARNESS:-own}
ENGINE=${ENGINE:-pgchunks}
WORKLOAD=${WORKLOAD:-.}
# In parentheses: go test splits a -bench pattern at a top-level | into whole
# alternatives, so 'put-4KiB$|get-4KiB$' bare would select get-4KiB only at
# the top level (nothing) and run put-4KiB alone.
WORKLOAD="($WORKLOAD)"

root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$root/bin"

# run SIDE DIR BENCH [VAR=value ...]: one round of a side's test binary.
run() {
	side=$1 dir=$2 bench=$3
	shift 3
	echo "bench-compare: round $i of $COUNT: $side" >&2
	(cd "$dir" && env "$@" "$tmp/$side.test" -test.run '^$' -test.bench "$bench" -test.benchtime "$BENCHTIME" -test.timeout 60m) \
		>>"$tmp/$side.txt"
}

# ran SIDE...: fail unless every side printed a result; a pattern that
# matches nothing passes silently, and benchstat would print an empty table.
ran() {
	for side; do
		grep -q '^Benchmark' "$tmp/$side.txt" || {
			echo "bench-compare: side $side ran no benchmark: does the pattern match? (under make, write \$ as \$\$)" >&2
			exit 1
		}
	done
}

if [ -n "$B_ENDPOINT" ]; then
	: "${B_ACCESS_KEY:?B_ACCESS_KEY must be set with B_ENDPOINT}" "${B_SECRET_KEY:?B_SECRET_KEY must be set with B_ENDPOINT}"
	(cd "$root" && $GO test -c -o "$tmp/a.test" ./bench/)
	cp "$tmp/a.test" "$tmp/b.test"
	for i in $(seq "$COUNT"); do
		run a "$root/bench" "Gateway/engine=$ENGINE/$WORKLOAD" S3GATE_CONFORMANCE_ENDPOINT=
		run b "$root/bench" "Gateway/engine=external/$WORKLOAD" \
			S3GATE_CONFORMANCE_ENDPOINT="$B_ENDPOINT" S3GATE_CONFORMANCE_ACCESS_KEY="$B_ACCESS_KEY" \
			S3GATE_CONFORMANCE_SECRET_KEY="$B_SECRET_KEY" S3GATE_CONFORMANCE_REGION="${B_REGION:-us-east-1}" \
			S3GATE_CONFORMANCE_CA_FILE="${B_CA_FILE:-}" S3GATE_BENCH_PIDS="${B_PIDS:-}"
	done
	ran a b
	# One name per workload on both sides, so that benchstat pairs them.
	for side in a b; do
		sed 's#^\(BenchmarkGateway\)/engine=[^/]*/#\1/#' "$tmp/$side.txt" >"$root/bin/bench-compare-$side.txt"
	done
	echo "bench-compare: a is s3gate ($ENGINE), b is $B_ENDPOINT; raw results in bin/bench-compare-{a,b}.txt" >&2
	"$BENCHSTAT" "s3gate=$root/bin/bench-compare-a.txt" "b=$root/bin/bench-compare-b.txt"
	exit 0
fi

case $HARNESS in
own | tree) ;;
*)
	echo "bench-compare: HARNESS=$HARNESS: want own or tree" >&2
	exit 1
	;;
esac
rev=$(git -C "$root" rev-parse --verify "$BASE^{commit}")
# The base as a plain tree (no worktree, nothing in .git changes).
mkdir "$tmp/base"
git -C "$root" archive "$rev" | tar -x -C "$tmp/base"
(cd "$root" && $GO test -c -o "$tmp/tree.test" ./bench/)
# Each side's benchmarks run from its own bench/ and build their own gateway
# (S3GATE_BENCH_BIN as the caller set it); with HARNESS=tree both run this
# tree's benchmark binary, each against its side's gateway, built as the
# benchmark builds its own (gatewayBinary).
base_dir=$tmp/base/bench
base_bin=${S3GATE_BENCH_BIN:-} tree_bin=${S3GATE_BENCH_BIN:-}
if [ "$HARNESS" = tree ]; then
	cp "$tmp/tree.test" "$tmp/base.test"
	base_dir=$root/bench base_bin=$tmp/base-s3gate tree_bin=$tmp/tree-s3gate
	(cd "$tmp/base" && $GO build -trimpath -o "$base_bin" ./cmd/s3gate)
	(cd "$root" && $GO build -trimpath -o "$tree_bin" ./cmd/s3gate)
else
	(cd "$tmp/base" && $GO test -c -o "$tmp/base.test" ./bench/)
fi
for i in $(seq "$COUNT"); do
	run base "$base_dir" "$BENCH" S3GATE_BENCH_BIN="$base_bin"
	run tree "$root/bench" "$BENCH" S3GATE_BENCH_BIN="$tree_bin"
done

ran base tree
cp "$tmp/base.txt" "$root/bin/bench-compare-base.txt"
cp "$tmp/tree.txt" "$root/bin/bench-compare-tree.txt"
echo "bench-compare: $BASE is $rev (harness: $HARNESS); raw results in bin/bench-compare-{base,tree}.txt" >&2
"$BENCHSTAT" "base=$tmp/base.txt" "tree=$tmp/tree.txt"
