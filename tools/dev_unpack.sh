#!/usr/bin/env bash
# Unpacks a build staged by tools/dev_stage.sh (DIR/bundle.tar.xz) in place, once; nothing to do for a loose build
# dir. tar's xz filter where xz is installed, else Python's tarfile (lzma is in its standard library).
# Usage (on the GPU machine): bash tools/dev_unpack.sh DIR
set -u
D=${1:?usage: tools/dev_unpack.sh DIR}
[ -f "$D/bundle.tar.xz" ] && [ ! -x "$D/h3" ] || exit 0
tar -xJf "$D/bundle.tar.xz" -C "$D" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$D/bundle.tar.xz" "$D"
