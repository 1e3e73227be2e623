#!/usr/bin/env bash
# Installs the Debian packages h3 builds and tests with (idempotent; needs root or sudo). libmicrohttpd-dev: `h3 serve`;
# chromium and curl: its tests (tests/cli/serve.sh drives the page in headless Chromium).
set -euo pipefail
pkgs="build-essential pkg-config libopenblas-dev libopenblas-openmp-dev libjansson-dev libutf8proc-dev libedit-dev \
      libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev libjpeg62-turbo-dev ffmpeg \
      libmicrohttpd-dev chromium curl"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
echo "dependencies ok"
