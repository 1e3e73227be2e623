#!/usr/bin/env bash
# libh3's public API (include/h3.h, docs/api.md): `make install` into a temporary prefix, only h3_* exported from
# libh3.so, examples/generate.c and examples/frames.c built against the installed copy through pkg-config and run
# on the tiny snapshot (the media part needs FFmpeg), and the API's messages (bad input, status codes).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
build=$(dirname "$H3")
prefix=$tmp/prefix
make -s install BUILD="$build" PREFIX="$prefix" >"$tmp/install.log" 2>&1
check "make install (log: $(tail -2 "$tmp/install.log"))" \
    '[ -f $prefix/include/h3.h ] && [ -f $prefix/lib/libh3.a ] && [ -L $prefix/lib/libh3.so ] && [ -f $prefix/lib/libh3.so.1 ] && [ -f $prefix/lib/pkgconfig/h3.pc ] && [ -x $prefix/bin/h3 ]'
check "soname libh3.so.1" 'readelf -d "$prefix/lib/libh3.so.1" | grep -q "SONAME.*libh3.so.1"'
nm -D --defined-only "$prefix/lib/libh3.so" | awk '{print $3}' | sort >"$tmp/exported"
check "only h3_* exported ($(grep -v '^h3_' "$tmp/exported" | head -3 | tr '\n' ' '))" \
    '[ -s "$tmp/exported" ] && ! grep -qv "^h3_" "$tmp/exported"'
grep -oE 'H3_PUBLIC [a-z0-9_ *]*h3_[a-z0-9_]+\(' include/h3.h | sed 's/.*[ *]\(h3_[a-z0-9_]*\)(/\1/' | sort >"$tmp/declared"
check "exported = declared in h3.h ($(diff "$tmp/declared" "$tmp/exported" | tr '\n' ' '))" 'cmp -s "$tmp/declared" "$tmp/exported"'
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -Wall -Wextra -Werror examples/generate.c $(pkg-config --cflags --libs h3) -o "$tmp/generate" 2>"$tmp/cc.err"
check "examples/generate.c builds against the installed library ($(head -3 "$tmp/cc.err"))" '[ -x "$tmp/generate" ]'
cc -std=c11 -Wall -Wextra -Werror examples/frames.c $(pkg-config --cflags --libs h3) -o "$tmp/frames" 2>"$tmp/cc2.err"
check "examples/frames.c builds against the installed library ($(head -3 "$tmp/cc2.err"))" '[ -x "$tmp/frames" ]'
export LD_LIBRARY_PATH=$prefix/lib
out=$("$tmp/generate" "$tmp/nowhere" "$tmp/x.mp4" 2>&1); rc=$?
check "a missing snapshot: exit 2, the API's message ($out)" '[ $rc = 2 ] && grep -q "bad input: snapshot_dir .*nowhere: not a directory" <<<"$out"'
out=$(H3_EXAMPLE_SIZE=100x64 "$tmp/generate" "$TINY" "$tmp/x.mp4" 2>&1); rc=$?
check "a bad canvas: exit 2 in the API's terms ($(tail -1 <<<"$out"))" \
    '[ $rc = 2 ] && grep -q "generate: bad input: width 100 height 64: both must be multiples of 32" <<<"$out" && [ ! -e "$tmp/x.mp4" ]'
if "$H3" generate -d "$TINY" -p x -o "$tmp/probe.mp4" --width 64 --height 32 --steps 1 2>&1 | grep -q "MEDIA=0"; then
    echo "(MEDIA=0 build: the example's MP4 run skipped)"
else
    out=$(H3_EXAMPLE_SIZE=64x32 H3_EXAMPLE_STEPS=2 "$tmp/generate" "$TINY" "$tmp/fox.mp4" "A red fox." 2>&1); rc=$?
    check "the example generates an MP4 on the tiny snapshot ($(tail -1 <<<"$out"))" \
        '[ $rc = 0 ] && [ -s "$tmp/fox.mp4" ] && grep -q "wrote $tmp/fox.mp4 on cpu" <<<"$out"'
    check "backend auto on a CPU build says why (the generation's first line)" \
        'grep -q "on cpu (auto: no CUDA in this build)" <<<"$out" || ldd "$prefix/lib/libh3.so" | grep -q libcudart'
    "$H3" generate -d "$TINY" -p "A red fox." --width 64 --height 32 --steps 2 -o "$tmp/cli.mp4" 2>/dev/null
    check "the example's MP4 = h3 generate's with the same settings" 'cmp -s "$tmp/fox.mp4" "$tmp/cli.mp4"'
    # examples/frames.c: every frame and the audio through the sinks into its own buffers, saved from them with
    # h3_save_png / h3_save_wav; they must be h3 generate's --frames-dir PNGs and --wav, byte for byte
    mkdir -p "$tmp/sink"
    out=$(H3_EXAMPLE_SIZE=64x32 H3_EXAMPLE_STEPS=2 "$tmp/frames" "$TINY" "$tmp/sink" "A red fox." 2>&1); rc=$?
    check "frames.c: every frame and the audio through the sinks ($(tail -1 <<<"$out"))" \
        '[ $rc = 0 ] && grep -qE "^([0-9]+) of \1 frames 64x32, [1-9][0-9]* audio samples at 32000 Hz, on (cpu|cuda)$" <<<"$out"'
    "$H3" generate -d "$TINY" -p "A red fox." --width 64 --height 32 --steps 2 -o '' --frames-dir "$tmp/cli_frames" \
        --wav "$tmp/cli.wav" 2>"$tmp/cli_frames.err"
    check "h3 generate's default backend is auto: on a CPU build the first line says why" \
        'grep -q "bf16 on cpu (auto: no CUDA in this build)$" "$tmp/cli_frames.err" || ldd "$H3" | grep -q libcudart'
    n=$(ls "$tmp/cli_frames" | grep -c '^frame_[0-9]*\.png$'); same=0
    for f in "$tmp"/cli_frames/frame_*.png; do cmp -s "$f" "$tmp/sink/$(basename "$f")" && same=$((same + 1)); done
    check "frames.c's frames = h3 generate --frames-dir's ($same of $n PNGs identical)" \
        '[ "$n" -gt 0 ] && [ "$same" = "$n" ] && [ "$(ls "$tmp/sink" | grep -c "^frame_")" = "$n" ]'
    check "frames.c's audio = h3 generate --wav's" 'cmp -s "$tmp/sink/audio.wav" "$tmp/cli.wav"'
    H3_EXAMPLE_SIZE=64x32 H3_EXAMPLE_STEPS=2 "$tmp/frames" "$TINY" "$tmp/nowhere/x" >/dev/null 2>"$tmp/f.err"; rc=$?
    check "frames.c: an output folder that does not exist fails with the writer's message ($(tail -1 "$tmp/f.err"))" \
        '[ $rc != 0 ] && grep -q "nowhere" "$tmp/f.err"'
fi
# the CLI's --backend auto (its default) and --device: a device other than 0 that is no usable GPU is refused with
# one line, exit 2, under auto too; --backend cpu takes only device 0 (docs/api.md "Backend auto")
if ! ldd "$H3" | grep -q libcudart; then
    out=$("$H3" generate -d "$TINY" -p x -o '' --dump-latents "$tmp/d.safetensors" --device 1 2>&1); rc=$?
    check "--device 1 on a CPU build: exit 2, one line ($out)" \
        '[ $rc = 2 ] && [ "$out" = "h3: generate: --device 1: not a usable GPU (no CUDA in this build)" ] && [ ! -e "$tmp/d.safetensors" ]'
fi
out=$("$H3" generate -d "$TINY" -p x -o '' --dump-latents "$tmp/d.safetensors" --backend cpu --device 2 2>&1); rc=$?
check "--backend cpu --device 2: exit 2, one line ($out)" \
    '[ $rc = 2 ] && [ "$out" = "h3: generate: --device 2: a GPU index, with --backend cuda or auto" ]'
check "--help: --backend cpu|cuda|auto with auto the default, --device N" \
    '"$H3" generate --help | grep -q -- "--backend cpu|cuda|auto .*" && "$H3" generate --help | grep -q -- "--device N"'
make -s uninstall BUILD="$build" PREFIX="$prefix" >/dev/null 2>&1
check "make uninstall removes every installed file ($(find "$prefix" -type f | head -3))" '[ -z "$(find "$prefix" -type f -o -type l)" ]'
echo "RESULT $pass $fail"
