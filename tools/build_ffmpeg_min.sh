#!/usr/bin/env bash
# Builds a small FFmpeg for the lent GPU machine, which has no FFmpeg (docs/cuda.md "The GPU machine"): the same
# release as the Debian libraries h3 is linked against here (same sonames and symbol versions, so the h3 binary
# built here loads it unchanged), configured with only what h3's media code uses: the libx264 / AAC / PNG / PCM
# encoders, the MP4 / WAV muxers, the common image, video and audio decoders and demuxers for keyframes and
# references, swscale and swresample. The result (the five libraries + libx264) is a few MB instead of the
# ~170 MB closure of Debian's full build, small enough to travel with tools/dev_stage.sh.
# Needs: deb-src for Debian's ffmpeg source package (or FFSRC=DIR with the unpacked source), libx264-dev, nasm.
# Usage: bash tools/build_ffmpeg_min.sh [OUTDIR, default build-ffmpeg]   (about 5 min on 2 cores)
set -euo pipefail
OUTDIR=$(realpath -m "${1:-build-ffmpeg}")
ver=$(dpkg-query -W -f='${source:Upstream-Version}' libavcodec-dev)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${FFSRC:-}" ]; then
    src=$FFSRC
else
    (cd "$work" && apt-get source --download-only "ffmpeg=$(dpkg-query -W -f='${source:Version}' libavcodec-dev)" >/dev/null)
    tar -xf "$work"/ffmpeg_"$ver".orig.tar.xz -C "$work"
    src=$work/ffmpeg-$ver
fi
dec=png,mjpeg,webp,gif,h264,hevc,vp8,vp9,av1,mpeg4,prores,aac,mp3,mp3float,flac,opus,vorbis,alac
dec=$dec,pcm_s16le,pcm_s24le,pcm_s32le,pcm_f32le,pcm_s16be,pcm_u8
dmx=mov,matroska,avi,wav,mp3,flac,ogg,aac,gif,image2,image_png_pipe,image_jpeg_pipe,image_webp_pipe
mkdir -p "$work/b"
cd "$work/b"
"$src/configure" --prefix="$work/inst" --enable-shared --disable-static --disable-programs --disable-doc \
    --disable-avdevice --disable-avfilter --disable-postproc --disable-network --disable-autodetect \
    --enable-gpl --enable-libx264 --enable-zlib --disable-everything \
    --enable-encoder=libx264,aac,png,pcm_s16le,pcm_f32le --enable-muxer=mp4,mov,wav \
    --enable-decoder="$dec" --enable-demuxer="$dmx" \
    --enable-parser=h264,hevc,vp8,vp9,av1,aac,mpegaudio,flac,opus,vorbis,png,mjpeg \
    --enable-bsf=aac_adtstoasc,h264_mp4toannexb,extract_extradata,vp9_superframe_split \
    --enable-protocol=file >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; exit 1; }
# configure only warns about a component name it does not know: make that an error
if grep -qi "^WARNING: Option --enable-.* did not match anything\|unknown" "$work/configure.log"; then
    grep -i "did not match\|unknown" "$work/configure.log"; exit 1
fi
nice make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
make install >/dev/null
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
for l in libavformat libavcodec libavutil libswscale libswresample; do
    cp -L "$work"/inst/lib/"$l".so.[0-9]* "$OUTDIR/" 2>/dev/null || true
done
# only the soname files (libavcodec.so.59, not .so.59.37.100)
find "$OUTDIR" -name '*.so.*.*' -delete
cp -L "$(ldconfig -p | awk '/libx264\.so\.[0-9]+ .*x86-64/ {print $NF; exit}')" "$OUTDIR/"
strip "$OUTDIR"/*.so.*
ls "$OUTDIR"
