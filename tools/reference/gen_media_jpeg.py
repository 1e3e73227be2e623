"""Fixtures for tests/test_media.c's JPEG cases: JPEG stills of the kinds users' keyframes are, and the pixels the
reference decodes from them (diffusers 0.42.1's load_image: PIL Image.open, ImageOps.exif_transpose,
convert("RGB")). PIL decodes JPEG with libjpeg-turbo; h3 reads JPEG with libjpeg-turbo too (docs/media.md).

Run: /work/venv/bin/python tools/reference/gen_media_jpeg.py   (numpy, pillow, safetensors, diffusers)
Writes tests/fixtures/media/jpeg/*.jpg and expected.safetensors (uint8 [H, W, 3] per file, key image.<name>).
"""

import io
import os
import struct

import numpy as np
import PIL
import PIL.features
from PIL import Image
from safetensors.numpy import save_file

from diffusers.utils import load_image

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "media", "jpeg")
rng = np.random.default_rng(4321)


def blocks(h, w, size):
    """Flat random colours in size x size squares: hard edges, where IDCT and chroma upsampling differ most."""
    x = np.zeros((h, w, 3), np.uint8)
    for by in range(0, h, size):
        for bx in range(0, w, size):
            x[by:by + size, bx:bx + size] = rng.integers(0, 256, 3)
    return x


def noisy(h, w):
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), (xx ^ yy) * 16 % 256], -1)
    return (base + rng.integers(-40, 41, (h, w, 3))).clip(0, 255).astype(np.uint8)


def exif_segment_mm(orientation):
    """An APP1 Exif payload in big-endian (Motorola) byte order with IFD0 = {Orientation: SHORT}: PIL writes
    little-endian, cameras often write this."""
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    return b"Exif\0\0" + b"MM" + struct.pack(">HI", 42, 8) + ifd


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    edges = blocks(64, 96, 8)
    files["edges_q90_420.jpg"] = dict(img=Image.fromarray(edges), quality=90, subsampling=2)
    files["odd_13x7_420.jpg"] = dict(img=Image.fromarray(noisy(7, 13)), quality=85, subsampling=2)
    files["odd_37x21_422.jpg"] = dict(img=Image.fromarray(noisy(21, 37)), quality=95, subsampling=1)
    files["noise_q75_444.jpg"] = dict(img=Image.fromarray(noisy(24, 40)), quality=75, subsampling=0)
    files["progressive_420.jpg"] = dict(img=Image.fromarray(blocks(40, 56, 5)), quality=88, subsampling=2,
                                        progressive=True)
    files["optimized_420.jpg"] = dict(img=Image.fromarray(noisy(33, 45)), quality=80, subsampling=2, optimize=True)
    files["gray.jpg"] = dict(img=Image.fromarray(noisy(19, 27)).convert("L"), quality=90)
    ex = Image.Exif()
    ex[0x0112] = 3
    files["exif3_420.jpg"] = dict(img=Image.fromarray(noisy(16, 24)), quality=90, subsampling=2, exif=ex.tobytes())
    ex = Image.Exif()
    ex[0x0112] = 5
    files["exif5_444.jpg"] = dict(img=Image.fromarray(noisy(16, 24)), quality=90, subsampling=0, exif=ex.tobytes())
    files["exif8_mm_420.jpg"] = dict(img=Image.fromarray(noisy(18, 26)), quality=90, subsampling=2,
                                     exif=exif_segment_mm(8))
    expected = {}
    for name, kw in files.items():
        img = kw.pop("img")
        img.save(os.path.join(OUT, name), **kw)
        ref = np.asarray(load_image(os.path.join(OUT, name)).convert("RGB"))
        expected["image." + name] = np.ascontiguousarray(ref)
        print(f"{name}: {ref.shape[1]}x{ref.shape[0]}")
    save_file(expected, os.path.join(OUT, "expected.safetensors"),
              metadata={"pillow": PIL.__version__, "libjpeg_turbo": str(PIL.features.version("libjpeg_turbo"))})


if __name__ == "__main__":
    main()
