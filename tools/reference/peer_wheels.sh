#!/usr/bin/env bash
# The wheels tests/cuda/run_peer_device.sh installs on the GPU machine (no internet there): diffusers 0.42.1 (pure
# Python, has MiniMax-H3) and torchao 0.18.0 (its abi3 wheel for CPython >= 3.10, manylinux_2_28 x86_64: the device's
# python3 is 3.12), into DIR (default .peer-wheels, git-ignored; ~9.3 MiB, carried with `carry: [".peer-wheels"]`).
# Usage (here, with network): bash tools/reference/peer_wheels.sh [DIR]
set -eu
D=${1:-.peer-wheels}
mkdir -p "$D"
PIP=${PIP:-python3 -m pip}
$PIP download -q --no-deps -d "$D" diffusers==0.42.1
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$D" torchao==0.18.0
ls -l "$D"
du -sh "$D"
