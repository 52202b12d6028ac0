"""Read the pixels of a PNG (8-bit RGB/RGBA, not interlaced: what Chromium's --screenshot writes),
with the standard library only: enough to find a colour in a screenshot."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """``(width, height, rows)``; each row is ``width * channels`` bytes, channels 3 or 4.

    Raises:
        ValueError: not a PNG of that kind.
    """
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if kind == b"IHDR":
            width, height, depth, ctype, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + size
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def count_colour(path: Path, rgb: tuple[int, int, int]) -> int:
    """How many pixels of ``path`` have exactly this colour."""
    width, bpp, rows = pixels(path)
    want = bytes(rgb)
    return sum(1 for row in rows for x in range(width) if row[x * bpp:x * bpp + 3] == want)
