"""Fixtures for tests/test_media.c: small media files and what the reference decodes from them.

The reference media path is diffusers 0.42.1 (modular_pipelines/minimax_h3): load_image (PIL) for
images, references.py _decode_video_file / _decode_audio_file (PyAV) for videos and audio, and
before_encoder.py _normalize_video_condition for the 24 fps whole-frame resampling. The input
files themselves are made with the ffmpeg CLI and PIL (generator side only; the engine never
spawns ffmpeg).

Run: PYTHONPATH=/tmp/pyav:/tmp/torchaudio nice python3 tools/reference/gen_media.py   (needs `pip install av` and
`pip install --no-deps --target /tmp/torchaudio torchaudio` for the resampler)
Writes tests/fixtures/media/*.{png,jpg,webp,mov,mp4,wav,flac} and expected.safetensors.
"""

import io
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file

import diffusers.modular_pipelines.minimax_h3.before_encoder as before_encoder
from diffusers.modular_pipelines.minimax_h3.references import _decode_audio_file, _decode_video_file
from diffusers.utils import load_image

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "media")
rng = np.random.default_rng(1234)
expected = {}


def path(name):
    return os.path.join(OUT, name)


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *args], check=True)


def png_bytes(array, bit_depth, color_type):
    """A minimal PNG writer for layouts PIL cannot save (16-bit RGB, 4-bit gray)."""
    h, w = array.shape[:2]
    rows = []
    for y in range(h):
        if bit_depth == 16:
            rows.append(b"\x00" + array[y].astype(">u2").tobytes())
        elif bit_depth == 4:
            row = array[y].reshape(-1)
            packed = bytes(((row[i] << 4) | (row[i + 1] if i + 1 < len(row) else 0)) for i in range(0, len(row), 2))
            rows.append(b"\x00" + packed)
        else:
            rows.append(b"\x00" + array[y].astype(np.uint8).tobytes())

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")


def expect_image(name):
    expected[f"image.{name}"] = torch.from_numpy(np.ascontiguousarray(np.asarray(load_image(path(name)))))


def make_images():
    w, h = 13, 7  # odd sizes on purpose
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(path("rgb.png"))
    Image.fromarray(rng.integers(0, 256, (h, w, 4), dtype=np.uint8), "RGBA").save(path("rgba.png"))
    Image.fromarray(rng.integers(0, 256, (h, w), dtype=np.uint8), "L").save(path("gray.png"))
    Image.fromarray(rng.integers(0, 256, (h, w, 2), dtype=np.uint8), "LA").save(path("gray_alpha.png"))
    pal = Image.fromarray(rng.integers(0, 16, (h, w), dtype=np.uint8), "P")
    pal.putpalette(list(rng.integers(0, 256, 48, dtype=np.uint8)))
    pal.info["transparency"] = 3
    pal.save(path("palette.png"), transparency=3)
    Image.fromarray(rng.integers(0, 2, (h, w), dtype=np.uint8) * 255, "L").convert("1").save(path("bilevel.png"))
    with open(path("rgb16.png"), "wb") as f:
        f.write(png_bytes(rng.integers(0, 65536, (h, w, 3)), 16, 2))
    with open(path("gray16.png"), "wb") as f:
        # Values up to 65535: PIL opens this as mode I;16 and convert("RGB") clips at 255.
        f.write(png_bytes(rng.integers(0, 65536, (h, w)), 16, 0))
    with open(path("gray_alpha16.png"), "wb") as f:
        f.write(png_bytes(rng.integers(0, 65536, (h, w, 2)), 16, 4))
    with open(path("rgba16.png"), "wb") as f:
        f.write(png_bytes(rng.integers(0, 65536, (h, w, 4)), 16, 6))
    with open(path("gray4.png"), "wb") as f:
        f.write(png_bytes(rng.integers(0, 16, (h, w)), 4, 0))
    # Smooth content so the lossy codecs stay close to the source.
    yy, xx = np.mgrid[0:32, 0:48]
    smooth = np.stack([xx * 5, yy * 7, (xx + yy) * 3], -1).clip(0, 255).astype(np.uint8)
    Image.fromarray(smooth).save(path("q420.jpg"), quality=92, subsampling=2)
    Image.fromarray(smooth).save(path("q444.jpg"), quality=92, subsampling=0)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 clockwise to display
    Image.fromarray(smooth).save(path("exif6.jpg"), quality=92, exif=exif.tobytes())
    Image.fromarray(rgb).save(path("lossless.webp"), lossless=True)
    exif8 = Image.Exif()
    exif8[0x0112] = 8
    Image.fromarray(rgb).save(path("exif8.webp"), lossless=True, exif=exif8.tobytes())
    Image.fromarray(smooth).save(path("lossy.webp"), quality=90)
    for name in ["rgb.png", "rgba.png", "gray.png", "gray_alpha.png", "palette.png", "bilevel.png", "rgb16.png",
                 "gray16.png", "gray_alpha16.png", "rgba16.png", "gray4.png", "q420.jpg", "q444.jpg", "exif6.jpg", "lossless.webp", "exif8.webp",
                 "lossy.webp"]:
        expect_image(name)


def index_frames(n, w=16, h=8):
    """Frame k: flat colour (k*9 % 256, 255 - k*5 % 256, k) plus a corner marker, so both the frame
    identity and the orientation show in the pixels."""
    frames = np.zeros((n, h, w, 3), dtype=np.uint8)
    for k in range(n):
        frames[k] = ((k * 9) % 256, 255 - (k * 5) % 256, k)
        frames[k, 0, 0] = (255, 0, 0)
        frames[k, 0, w - 1] = (0, 255, 0)
        frames[k, h - 1, 0] = (0, 0, 255)
    return frames


def write_raw_video(name, frames, fps, codec_args, extra=(), audio=None):
    raw = path(name + ".rgb")
    frames.tofile(raw)
    args = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{frames.shape[2]}x{frames.shape[1]}", "-r", fps, "-i", raw]
    if audio is not None:
        wav, = audio
        args += ["-i", wav]
    ffmpeg(*args, *codec_args, *extra, path(name))
    os.remove(raw)


def set_rotation(name, b):
    """Writes the rotation [[0, b], [-b, 0]] (16.16) into the video track's tkhd matrix, the way
    phones tag portrait clips (ffmpeg 5.1's CLI cannot set a display matrix). b = 1 gives
    av_display_rotation_get() = -90 (shown turned 90 degrees clockwise), b = -1 gives +90."""
    with open(path(name), "rb") as f:
        data = bytearray(f.read())
    at = data.find(b"tkhd")
    assert at > 0 and data[at + 4] == 0, "expected a version-0 tkhd box"
    matrix = [0, b * 0x10000, 0, -b * 0x10000, 0, 0, 0, 0, 0x40000000]
    data[at + 44:at + 80] = struct.pack(">9i", *matrix)
    with open(path(name), "wb") as f:
        f.write(data)


def expect_video(name):
    frames, fps, audio, sr = _decode_video_file(path(name))
    # The 24 fps rule with the canvas resize switched off (identity canvas).
    saved = before_encoder.resolve_canvas_size
    before_encoder.resolve_canvas_size = lambda w, h, *a: (h, w)
    try:
        out = before_encoder.MiniMaxH3Ref2VASetupStep._normalize_video_condition(frames, fps, 10**6, 32, 768, 1032192, 24.0)
    finally:
        before_encoder.resolve_canvas_size = saved
    expected[f"video.{name}.frames"] = torch.from_numpy(np.ascontiguousarray(out))
    expected[f"video.{name}.fps"] = torch.tensor([fps], dtype=torch.float64)
    expected[f"video.{name}.source_frames"] = torch.tensor([frames.shape[0]], dtype=torch.int64)
    if audio is not None:
        expected[f"video.{name}.audio"] = audio.contiguous()
        expected[f"video.{name}.sample_rate"] = torch.tensor([sr], dtype=torch.int64)


def make_videos():
    # A 44.1 kHz mono tone as soundtrack.
    t = np.arange(int(44100 * 0.5)) / 44100
    tone = (0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype("<i2")
    wav = path("tone_tmp.wav")
    with open(wav, "wb") as f:
        data = tone.tobytes()
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                struct.pack("<IHHIIHH", 16, 1, 1, 44100, 88200, 2, 16) + b"data" + struct.pack("<I", len(data)) + data)
    png_mov = ["-c:v", "png", "-pix_fmt", "rgb24"]
    write_raw_video("v30.mov", index_frames(12), "30", png_mov, ["-c:a", "pcm_s16le"], audio=(wav,))
    write_raw_video("v25_rot90.mov", index_frames(12), "25", png_mov)
    set_rotation("v25_rot90.mov", 1)
    write_raw_video("v24_rot270.mov", index_frames(7), "24", png_mov)
    set_rotation("v24_rot270.mov", -1)
    write_raw_video("v23976.mov", index_frames(30), "24000/1001", png_mov)
    write_raw_video("v60.mov", index_frames(25), "60", png_mov)
    write_raw_video("v12.mov", index_frames(9), "12", png_mov)
    # Lossy H.264 + AAC in MP4: the YUV -> RGB path, compared with a tolerance.
    yy, xx = np.mgrid[0:32, 0:48]
    smooth = np.stack([np.stack([xx * 5 + k, yy * 7, (xx + yy) * 3], -1) for k in range(12)]).clip(0, 255).astype(np.uint8)
    write_raw_video("h264_aac.mp4", smooth, "30", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "10"],
                    ["-c:a", "aac", "-b:a", "128k"], audio=(wav,))
    os.remove(wav)
    for name in ["v30.mov", "v25_rot90.mov", "v24_rot270.mov", "v23976.mov", "v60.mov", "v12.mov", "h264_aac.mp4"]:
        expect_video(name)


def make_audio():
    n = 4410
    stereo = np.stack([np.sin(np.arange(n) * 0.05), 0.5 * np.cos(np.arange(n) * 0.031)])
    pcm = (stereo.T * 30000).astype("<i2")
    with open(path("stereo44k.wav"), "wb") as f:
        data = pcm.tobytes()
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                struct.pack("<IHHIIHH", 16, 1, 2, 44100, 176400, 4, 16) + b"data" + struct.pack("<I", len(data)) + data)
    mono = (np.sin(np.arange(3200) * 0.07) * 20000).astype("<i2")
    raw = path("mono.raw")
    mono.tofile(raw)
    ffmpeg("-f", "s16le", "-ar", "32000", "-ac", "1", "-i", raw, "-c:a", "flac", path("mono32k.flac"))
    os.remove(raw)
    for name in ["stereo44k.wav", "mono32k.flac"]:
        audio, sr = _decode_audio_file(path(name))
        expected[f"audio.{name}"] = audio.contiguous()
        expected[f"audio.{name}.sample_rate"] = torch.tensor([sr], dtype=torch.int64)


def write_wav(name, audio, rate, float32=False):
    """audio: (channels, samples) in [-1, 1]; 16-bit PCM or IEEE float WAV."""
    ch = audio.shape[0]
    if float32:
        data, fmt, bits = audio.T.astype("<f4").tobytes(), 3, 32
    else:
        data, fmt, bits = (audio.T * 32767).round().astype("<i2").tobytes(), 1, 16
    block = ch * bits // 8
    with open(path(name), "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " +
                struct.pack("<IHHIIHH", 16, fmt, ch, rate, rate * block, block, bits) + b"data" +
                struct.pack("<I", len(data)) + data)


def make_resampled():
    """_normalize_audio_condition (torchaudio Resample to 32 kHz, truncation at the native rate,
    mono duplicated) on files at other rates; needs torchaudio (pip install --no-deps torchaudio)."""
    norm = before_encoder.MiniMaxH3Ref2VASetupStep._normalize_audio_condition
    t = lambda n, r: np.arange(n) / r
    write_wav("stereo48k.wav", np.stack([0.6 * np.sin(2 * np.pi * 1000 * t(2400, 48000)),
                                         rng.uniform(-0.5, 0.5, 2400)]), 48000, float32=True)
    write_wav("mono22k.wav", (0.7 * np.sin(2 * np.pi * 300 * t(2205, 22050)))[None], 22050)
    write_wav("r37800.wav", rng.uniform(-0.8, 0.8, (2, 1890)), 37800, float32=True)
    write_wav("mono8k.wav", rng.uniform(-0.8, 0.8, (1, 400)), 8000, float32=True)
    cases = [("stereo44k.wav", 1000.0), ("stereo44k.wav", 0.05), ("stereo48k.wav", 1000.0), ("mono22k.wav", 1000.0),
             ("mono22k.wav", 0.0731), ("r37800.wav", 1000.0), ("mono8k.wav", 1000.0), ("v30.mov", 0.25)]
    for name, max_duration in cases:
        audio, sr = _decode_audio_file(path(name))
        out = norm(audio, sr, 32000, max_duration)
        expected[f"resampled.{name}.{max_duration!r}"] = out.contiguous()


def make_slots():
    """The 24 fps rule itself: source index of every output frame for several rates."""
    n = 100
    idx = np.zeros((n, 1, 1, 3), dtype=np.uint8)
    idx[:, 0, 0, 0] = np.arange(n)
    saved = before_encoder.resolve_canvas_size
    before_encoder.resolve_canvas_size = lambda w, h, *a: (h, w)
    try:
        for fps in [30.0, 25.0, 24000 / 1001, 30000 / 1001, 60.0, 50.0, 12.0, 15.0, 24.0, 10.0, 7.5, 119.88]:
            out = before_encoder.MiniMaxH3Ref2VASetupStep._normalize_video_condition(idx, fps, 10**6, 32, 768, 1032192, 24.0)
            expected[f"slots.{fps!r}"] = torch.from_numpy(out[:, 0, 0, 0].astype(np.int64))
    finally:
        before_encoder.resolve_canvas_size = saved


def main():
    os.makedirs(OUT, exist_ok=True)
    make_images()
    make_videos()
    make_audio()
    make_resampled()
    make_slots()
    save_file(expected, path("expected.safetensors"))
    total = sum(os.path.getsize(path(f)) for f in os.listdir(OUT))
    print(f"wrote {len(expected)} tensors, {len(os.listdir(OUT))} files, {total} bytes in {OUT}")
    for k, v in expected.items():
        if k.endswith(".fps") or k.endswith("source_frames") or k.endswith("sample_rate"):
            print(k, v.tolist())


if __name__ == "__main__":
    sys.exit(main())
