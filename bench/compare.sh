#!/bin/sh
# make bench-compare: the bench/ benchmarks of git revision BASE (default
# main) and of the working tree, side by side in one run: both test binaries
# are built first, then run alternately (base, tree, base, tree, ...) COUNT
# times each, so that a shared machine's drifting load lands on both; then
# benchstat prints each metric of the tree against the base (README.md).
set -eu
BASE=${BASE:-main}
COUNT=${COUNT:-3}
BENCH=${BENCH:-Gateway}
BENCHTIME=${BENCHTIME:-1x}
GO=${GO:-go}
BENCHSTAT=${BENCHSTAT:-$($GO env GOPATH)/bin/benchstat}

root=$(git rev-parse --show-toplevel)
rev=$(git -C "$root" rev-parse --verify "$BASE^{commit}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# The base as a plain tree (no worktree, nothing in .git changes).
mkdir "$tmp/base"
git -C "$root" archive "$rev" | tar -x -C "$tmp/base"
(cd "$tmp/base" && $GO test -c -o "$tmp/base.test" ./bench/)
(cd "$root" && $GO test -c -o "$tmp/tree.test" ./bench/)

for i in $(seq "$COUNT"); do
	for side in base tree; do
		dir=$root/bench
		[ "$side" = base ] && dir=$tmp/base/bench
		echo "bench-compare: round $i of $COUNT: $side" >&2
		(cd "$dir" && "$tmp/$side.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime "$BENCHTIME" -test.timeout 60m) \
			>>"$tmp/$side.txt"
	done
done

mkdir -p "$root/bin"
cp "$tmp/base.txt" "$root/bin/bench-compare-base.txt"
cp "$tmp/tree.txt" "$root/bin/bench-compare-tree.txt"
echo "bench-compare: $BASE is $rev; raw results in bin/bench-compare-{base,tree}.txt" >&2
"$BENCHSTAT" "base=$tmp/base.txt" "tree=$tmp/tree.txt"
