#!/usr/bin/env bash
# Stages a CUDA build for the lent GPU machine: stripped binaries of BUILD (default build-cuda) plus
# the shared libraries that machine lacks, into DEST (default .dev-main, git-ignored), laid out like
# a build dir so tests/cuda/run_device.sh DEST and run_e2e_device.sh DEST work there.
set -eu
B=${1:-build-cuda}
D=${2:-.dev-main}
rm -rf "$D"
mkdir -p "$D/tests/cuda" "$D/lib"
cp "$B/h3" "$D/h3"
for f in "$B"/tests/cuda/*; do [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$D/tests/cuda/"; done
strip "$D/h3" "$D"/tests/cuda/*
cp -L /usr/lib/x86_64-linux-gnu/libutf8proc.so.2 /lib/x86_64-linux-gnu/libjansson.so.4 "$D/lib/"
du -sh "$D"
