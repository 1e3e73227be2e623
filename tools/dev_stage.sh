#!/usr/bin/env bash
# Stages a CUDA build for the lent GPU machine: stripped binaries of BUILD (default build-cuda) plus
# the shared libraries that machine lacks, into DEST (default .dev-main, git-ignored), laid out like
# a build dir so tests/cuda/run_device.sh DEST, run_harness_device.sh DEST and run_e2e_device.sh DEST work there, packed into DEST/bundle.tar.xz
# (the run_*_device.sh scripts unpack it with tools/dev_unpack.sh DEST).
set -eu
B=${1:-build-cuda}
D=${2:-.dev-main}
rm -rf "$D"
mkdir -p "$D/tests/cuda" "$D/lib"
cp "$B/h3" "$D/h3"
for f in "$B"/tests/cuda/*; do [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$D/tests/cuda/"; done
# the micro-benchmarks of bench/ that were built (make BUILD=... bench)
if ls "$B"/bench/* >/dev/null 2>&1; then
    mkdir -p "$D/bench"
    for f in "$B"/bench/*; do [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$D/bench/" && strip "$D/bench/$(basename "$f")"; done
fi
# the backend-ops harness (tests/cuda/run_harness_device.sh)
[ -x "$B/tests/test_backend_ops" ] && cp "$B/tests/test_backend_ops" "$D/tests/" && strip "$D/tests/test_backend_ops"
# the LoRA test (tests/cuda/run_lora_stream_device.sh runs its streaming case with --stream-cuda), when built
[ -x "$B/tests/test_lora" ] && cp "$B/tests/test_lora" "$D/tests/" && strip "$D/tests/test_lora"
# the --parallel parity test (tests/cuda/run_parallel_device.sh runs it with --cuda N), when built
[ -x "$B/tests/test_parallel" ] && cp "$B/tests/test_parallel" "$D/tests/" && strip "$D/tests/test_parallel"
# the media tests (the MP4 writer's bytes on that host's CPU), when built with MEDIA=1
[ -x "$B/tests/test_media" ] && cp "$B/tests/test_media" "$D/tests/" && strip "$D/tests/test_media"
strip "$D/h3"; if ls "$D"/tests/cuda/* >/dev/null 2>&1; then strip "$D"/tests/cuda/*; fi
# libh3.so and examples/ built against it (tests/cuda/run_api_device.sh), when BUILD has the library
if [ -f "$B/libh3.so.1" ]; then
    cp "$B/libh3.so.1" "$D/" && ln -sf libh3.so.1 "$D/libh3.so" && mkdir -p "$D/examples"
    for ex in examples/*.c; do
        cc -std=c11 -O2 -Iinclude "$ex" -L"$D" -lh3 -Wl,-rpath,'$ORIGIN/..:$ORIGIN/../lib' -o "$D/examples/$(basename "$ex" .c)"
    done
    strip "$D/libh3.so.1" "$D"/examples/*
fi
cp -L /usr/lib/x86_64-linux-gnu/libutf8proc.so.2 /lib/x86_64-linux-gnu/libjansson.so.4 "$D/lib/"
# the session's line editor (EDIT=1) and what it needs
for l in libedit.so.2 libbsd.so.0 libmd.so.0; do
    p=$(ldd "$B/h3" | awk -v l="$l" '$1 == l { print $3 }')
    [ -n "$p" ] && cp -L "$p" "$D/lib/"
done
# FFmpeg, when BUILD was made with MEDIA=1: the GPU machine has none, so the small build of
# tools/build_ffmpeg_min.sh (FFMPEG_MIN, default build-ffmpeg) travels instead of Debian's ~170 MB closure,
# with libjpeg (the JPEG keyframe decoder)
if ldd "$B/h3" | grep -q 'libavcodec'; then
    FF=${FFMPEG_MIN:-build-ffmpeg}
    [ -f "$FF/libavcodec.so.59" ] || { echo "dev_stage: $B/h3 links FFmpeg; build $FF with tools/build_ffmpeg_min.sh first"; exit 1; }
    cp -L "$FF"/*.so.* "$D/lib/"
    p=$(ldd "$B/h3" | awk '$1 ~ /^libjpeg\.so/ { print $3 }')
    [ -n "$p" ] && cp -L "$p" "$D/lib/"
fi
# libmicrohttpd (h3 serve) and what it needs (GnuTLS and its libraries), when h3 links it: not on the GPU machine
if ldd "$B/h3" | grep -q 'libmicrohttpd'; then
    ldd "$B/h3" | awk '$1 ~ /^lib(microhttpd|gnutls|p11-kit|idn2|unistring|tasn1|nettle|hogweed|gmp|ffi)\.so/ { print $3 }' |
        while read -r p; do cp -L "$p" "$D/lib/"; done
fi
# one xz bundle (the binaries share the static library: 31 MB -> ~1.2 MB), so the tree + this + diffusers' source
# (.dev-ref) stay under the device's 64 MiB carry; tools/dev_unpack.sh (run by tests/cuda/run_*_device.sh) unpacks it
tar -cJf "$D.bundle" -C "$D" . && rm -rf "$D" && mkdir -p "$D" && mv "$D.bundle" "$D/bundle.tar.xz"
du -sh "$D"
