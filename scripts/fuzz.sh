#!/bin/sh
# Runs every fuzz target of Spindle's decoders of untrusted bytes for
# BUDGET each: a Go duration (2m in make fuzz) or a count of inputs (2000x
# in make check). New crashers land in the package's testdata/fuzz/TARGET,
# where they stay as seeds: commit them with the fix.
#
# A duration can end a run with a bare "context deadline exceeded" and no
# crasher: a race in Go's fuzzing coordinator at the deadline, under load
# (go.dev/issue/75804, fixed in Go 1.27). A count has no deadline, which
# is why make check, which must not fail on it, gives one.
#
#   scripts/fuzz.sh [BUDGET]
set -eu
budget=${1:-2000x}
GO=${GO:-go}
cd "$(dirname "$0")/.."

# package target: one line each.
targets='
./feed FuzzInspectIPC
./feed FuzzInspectParquet
./feed FuzzGunzipInto
./feed/push FuzzPushedStream
./executor FuzzExtract
./internal/hadoop/hadooprpc FuzzReadCredentials
./internal/hadoop/hadooprpc FuzzResponsePacket
./internal/hadoop/hadooprpc FuzzDigestChallenge
'

echo "$targets" | while read -r pkg target; do
	[ -n "$pkg" ] || continue
	echo "fuzz $pkg $target for $budget"
	# -parallel 1: a fuzz run shares the machine with the build.
	$GO test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -parallel 1
done
