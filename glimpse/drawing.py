"""Pictures of where a model looked, as (3, H, W) uint8 arrays for TensorBoard and reports.

Hard attention: the canvas with every glimpse's nested boxes and the path between them, and
the glimpse contents as in RAM's Figure 3. DRAW: the filterbank's box per step, drawn the same
way so the two compare side by side. Show-Attend-Tell: the attention map of each step blended
over the canvas. Time runs from green (first) to red (last).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from glimpse.coords import unit_to_pixels

BACKGROUND = np.array([40, 40, 40], np.uint8)
EARLY, LATE = np.array([0, 230, 60]), np.array([255, 40, 40])


def time_colour(t: int, steps: int) -> np.ndarray:
    mix = t / max(1, steps - 1)
    return ((1 - mix) * EARLY + mix * LATE).astype(np.uint8)


def to_rgb_canvas(canvas, upscale: int = 4) -> np.ndarray:
    """(H, W) uint8 or float in [0, 1] -> (3, H*upscale, W*upscale) uint8 grey, nearest-neighbour."""
    canvas = np.asarray(canvas)
    grey = canvas if canvas.dtype == np.uint8 else (np.clip(canvas, 0, 1) * 255).astype(np.uint8)
    grey = grey.repeat(upscale, 0).repeat(upscale, 1)
    return np.repeat(grey[None], 3, axis=0).copy()


def _box(image: np.ndarray, x0: float, y0: float, width: float, colour, upscale: int, thickness: int = 1) -> None:
    """Outline of the square [x0, x0+width) x [y0, y0+width) (canvas pixels), clipped to the image."""
    _, h, w = image.shape
    left, top = int(round(x0 * upscale)), int(round(y0 * upscale))
    right, bottom = int(round((x0 + width) * upscale)) - 1, int(round((y0 + width) * upscale)) - 1
    colour = np.asarray(colour, np.uint8)[:, None, None]
    for k in range(thickness):
        for row in (top + k, bottom - k):
            if 0 <= row < h:
                image[:, row:row + 1, max(left, 0):min(right + 1, w)] = colour
        for col in (left + k, right - k):
            if 0 <= col < w:
                image[:, max(top, 0):min(bottom + 1, h), col:col + 1] = colour


def _line(image: np.ndarray, start, end, colour, thickness: int = 2) -> None:
    """Segment between two points given in image pixels."""
    _, h, w = image.shape
    n = int(max(abs(end[0] - start[0]), abs(end[1] - start[1]))) + 1
    xs = np.linspace(start[0], end[0], n).round().astype(int)
    ys = np.linspace(start[1], end[1], n).round().astype(int)
    for dx in range(thickness):
        for dy in range(thickness):
            x, y = xs + dx - thickness // 2, ys + dy - thickness // 2
            keep = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            image[:, y[keep], x[keep]] = np.asarray(colour, np.uint8)[:, None]


def _dot(image: np.ndarray, centre, radius: int, colour) -> None:
    _, h, w = image.shape
    x, y = int(round(centre[0])), int(round(centre[1]))
    image[:, max(0, y - radius):min(h, y + radius + 1), max(0, x - radius):min(w, x + radius + 1)] = \
        np.asarray(colour, np.uint8)[:, None, None]


def _path_picture(canvas, centres_px: np.ndarray, widths: np.ndarray, upscale: int) -> np.ndarray:
    """Canvas with, for step t, square boxes of ``widths[t]`` (list of widths) centred on ``centres_px[t]``."""
    image = to_rgb_canvas(canvas, upscale)
    steps = len(centres_px)
    for t in range(steps):
        colour = time_colour(t, steps)
        for s, width in enumerate(widths[t]):
            origin = np.floor(centres_px[t] - width / 2 + 0.5)  # the retina's rounding
            # the finest scale bold, coarser ones dimmer so that the nesting stays readable
            shade = colour if s == 0 else (0.45 * colour + 0.55 * np.array([90, 90, 90])).astype(np.uint8)
            _box(image, origin[0], origin[1], width, shade, upscale, thickness=2 if s == 0 else 1)
    points = centres_px * upscale
    for t in range(steps - 1):
        _line(image, points[t], points[t + 1], time_colour(t, steps))
    _dot(image, points[0], 3, time_colour(0, steps))
    if steps > 1:
        _dot(image, points[-1], 3, time_colour(steps - 1, steps))
    return image


def draw_glimpse_path(canvas, locations, glimpse_size: int, n_scales: int, upscale: int = 4) -> np.ndarray:
    """RAM: ``locations`` (T, 2) unit (x, y); nested boxes of widths g * 2**s for every glimpse."""
    h, w = np.asarray(canvas).shape
    loc = torch.as_tensor(np.asarray(locations, np.float32))
    centres = torch.stack([unit_to_pixels(loc[:, 0], w), unit_to_pixels(loc[:, 1], h)], 1).numpy()
    widths = [[glimpse_size * 2**s for s in range(n_scales)]] * len(centres)
    return _path_picture(canvas, centres, widths, upscale)


def draw_filterbank_path(canvas, centres, extents, upscale: int = 4) -> np.ndarray:
    """DRAW: ``centres`` (T, 2) unit (x, y), ``extents`` (T,) grid widths in pixels (N * stride)."""
    h, w = np.asarray(canvas).shape
    loc = torch.as_tensor(np.asarray(centres, np.float32))
    px = torch.stack([unit_to_pixels(loc[:, 0], w), unit_to_pixels(loc[:, 1], h)], 1).numpy()
    return _path_picture(canvas, px, [[float(e)] for e in np.asarray(extents)], upscale)


def glimpse_tile(glimpse: np.ndarray) -> np.ndarray:
    """(k, g, g) -> (g*2**(k-1),)*2 float: each scale upscaled to its true width, finer ones pasted on top."""
    k, g, _ = glimpse.shape
    side = g * 2 ** (k - 1)
    tile = np.zeros((side, side), np.float32)
    for s in reversed(range(k)):
        width = g * 2**s
        start = (side - width) // 2
        tile[start:start + width, start:start + width] = glimpse[s].repeat(2**s, 0).repeat(2**s, 1)
    return tile


def glimpse_strip(glimpses, height: int = 160, pad: int = 2) -> np.ndarray:
    """(T, k, g, g) glimpses -> (3, h, w): the T tiles side by side, each about ``height`` pixels."""
    glimpses = np.asarray(glimpses, np.float32)
    tiles = [glimpse_tile(g) for g in glimpses]
    side = tiles[0].shape[0]
    scale = max(1, round(height / side))
    pictures = [to_rgb_canvas(tile, scale) for tile in tiles]
    return side_by_side(pictures, pad=pad)


def overlay_attention(canvas, alpha, upscale: int = 4) -> np.ndarray:
    """Show-Attend-Tell: ``alpha`` (T, gh, gw) -> the T maps, each upsampled to the canvas,
    normalised to [0, 1] and blended as heat over the grey canvas, side by side."""
    base = to_rgb_canvas(canvas, upscale).astype(np.float32)
    alpha = torch.as_tensor(np.asarray(alpha, np.float32))[:, None]
    maps = F.interpolate(alpha, size=base.shape[1:], mode="bilinear", align_corners=False)[:, 0].numpy()
    frames = []
    for m in maps:
        m = (m - m.min()) / max(float(m.max() - m.min()), 1e-8)
        heat = np.stack([255 * m, 160 * m ** 2, np.zeros_like(m)])
        frames.append(np.clip(0.55 * base + 0.75 * heat, 0, 255).astype(np.uint8))
    return side_by_side(frames)


def side_by_side(images: list[np.ndarray], pad: int = 4) -> np.ndarray:
    """(3, h_i, w_i) images left to right, top-aligned, on a dark background."""
    height = max(im.shape[1] for im in images)
    width = sum(im.shape[2] for im in images) + pad * (len(images) - 1)
    out = np.empty((3, height, width), np.uint8)
    out[:] = BACKGROUND[:, None, None]
    x = 0
    for im in images:
        out[:, :im.shape[1], x:x + im.shape[2]] = im
        x += im.shape[2] + pad
    return out


def stack_rows(images: list[np.ndarray], pad: int = 4) -> np.ndarray:
    """(3, h_i, w_i) images top to bottom, left-aligned."""
    transposed = side_by_side([im.transpose(0, 2, 1) for im in images], pad)
    return np.ascontiguousarray(transposed.transpose(0, 2, 1))
