#!/bin/sh
# Runs every fuzz target of Spindle's decoders of untrusted bytes for
# DURATION each (a Go duration: 5s in make check, longer in make fuzz).
# New crashers land in the package's testdata/fuzz/TARGET, where they stay
# as seeds: commit them with the fix.
#
#   scripts/fuzz.sh [DURATION]
set -eu
duration=${1:-5s}
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
	echo "fuzz $pkg $target for $duration"
	# -parallel 1: a fuzz run shares the machine with the build.
	$GO test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$duration" -parallel 1
done
