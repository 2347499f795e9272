"""Drawing primitives and the picture of a glimpse path, as (3, H, W) uint8 RGB arrays (CHW).

What an environment needs to render its episodes (:func:`draw_glimpse_path`) and what the
attention pictures of :mod:`glimpse.viz` are built from: boxes, paths, markers, step numbers,
layouts. Time runs along one colormap, cyan (first) -> green -> yellow -> orange -> red (last);
at ``upscale >= 3`` every centre is also numbered (1 = first). Locations follow
:mod:`envs.coords`; glimpse boxes use the retina's own rounding (:func:`envs.retina.patch_origin`):
a box ``w`` wide centred at pixel coordinate ``c`` covers columns ``round_half_up(c - w/2) ..
+w-1``, exactly what the sensor reads. Plain numpy: slices for boxes, one vectorised call per
line segment.
"""

from __future__ import annotations

import numpy as np
import torch

from envs.coords import unit_to_pixels
from envs.retina import patch_origin


PAD = np.array([64, 64, 64], np.uint8)  # separators and padding between pictures
HALO = np.array([0, 0, 0], np.float32)  # dark outline under path and markers, for contrast on white strokes
# cyan -> green -> yellow -> orange -> red: saturated everywhere, so never confused with the grey canvas
_ANCHORS = np.array([[0, 200, 255], [40, 230, 100], [250, 230, 0], [255, 140, 0], [255, 40, 40]], np.float32)
_COARSE_OPACITY = 0.6  # coarser scales of a RAM glimpse: thinner and see-through, so the finest box stands out

# 3x5 bitmap digits for step labels
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001010010010",
    "8": "111101111101111", "9": "111101111001111",
}
_GLYPHS = {c: np.array([int(b) for b in bits], bool).reshape(5, 3) for c, bits in _FONT.items()}


# ----------------------------------------------------------------------------- basics

def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _grey_uint8(canvas) -> np.ndarray:
    canvas = _np(canvas)
    if canvas.ndim == 3 and canvas.shape[0] == 1:
        canvas = canvas[0]
    if canvas.ndim != 2:
        raise ValueError(f"canvas must be (H, W), got shape {canvas.shape}")
    if canvas.dtype == np.uint8:
        return canvas
    return np.round(np.clip(canvas.astype(np.float32), 0.0, 1.0) * 255.0).astype(np.uint8)


def to_rgb_canvas(canvas, upscale: int = 4) -> np.ndarray:
    """(H, W) uint8, or float in [0, 1] -> (3, H*upscale, W*upscale) uint8 grey, nearest neighbour."""
    if upscale < 1:
        raise ValueError(f"upscale must be >= 1, got {upscale}")
    grey = _grey_uint8(canvas).repeat(upscale, 0).repeat(upscale, 1)
    return np.ascontiguousarray(np.broadcast_to(grey, (3,) + grey.shape))


def time_colours(steps: int) -> np.ndarray:
    """(steps, 3) uint8: step t's colour, from the early end of the colormap to the late end."""
    pos = np.linspace(0.0, 1.0, steps) if steps > 1 else np.zeros(max(steps, 0))
    idx = pos * (len(_ANCHORS) - 1)
    lo = np.minimum(np.floor(idx).astype(int), len(_ANCHORS) - 2)
    frac = (idx - lo)[:, None]
    return np.round(_ANCHORS[lo] * (1 - frac) + _ANCHORS[lo + 1] * frac).astype(np.uint8)


def _span(a: int, b: int, n: int) -> slice | None:
    """[a, b) clipped to [0, n), or None when nothing is left."""
    a, b = max(a, 0), min(b, n)
    return slice(a, b) if a < b else None


def _paint(image: np.ndarray, rows: slice, cols: slice, colour, opacity: float = 1.0, mask=None) -> None:
    region = image[:, rows, cols]
    colour = np.asarray(colour, np.float32)[:, None]
    if mask is None:
        mask = np.ones(region.shape[1:], bool)
    if opacity >= 1.0:
        region[:, mask] = np.round(colour).astype(np.uint8)
    else:
        mixed = (1 - opacity) * region[:, mask].astype(np.float32) + opacity * colour
        region[:, mask] = np.round(mixed).astype(np.uint8)


def _outline(image: np.ndarray, left: int, top: int, right: int, bottom: int, colour,
             thickness: int = 1, opacity: float = 1.0) -> None:
    """Outline of the pixel rectangle [left, right) x [top, bottom), ``thickness`` pixels wide
    on its inside, clipped to the image: a side off the image is not drawn (the box runs off the
    canvas), except where the box spans the image's whole width or height (DRAW's filterbank before
    it zooms in): there its sides are drawn along the image's edges, so that it still shows."""
    _, h, w = image.shape
    if left < 0 and right > w:
        left, right = 0, w
    if top < 0 and bottom > h:
        top, bottom = 0, h
    rows, cols = _span(top, bottom, h), _span(left, right, w)
    if rows is None or cols is None:
        return
    yy = np.arange(rows.start, rows.stop)[:, None]
    xx = np.arange(cols.start, cols.stop)[None, :]
    t = max(1, min(thickness, (right - left + 1) // 2, (bottom - top + 1) // 2))
    band = (yy < top + t) | (yy >= bottom - t) | (xx < left + t) | (xx >= right - t)
    _paint(image, rows, cols, colour, opacity, band)


def _segment(image: np.ndarray, start, end, colour_start, colour_end, thickness: int = 1) -> None:
    """Straight segment between two points in image pixel coordinates (pixel i spans [i, i+1)),
    its colour running from ``colour_start`` to ``colour_end``; 8-connected, vectorised."""
    _, h, w = image.shape
    (x0, y0), (x1, y1) = np.asarray(start, np.float64), np.asarray(end, np.float64)
    ix0, iy0, ix1, iy1 = (int(np.floor(v)) for v in (x0, y0, x1, y1))
    n = max(abs(ix1 - ix0), abs(iy1 - iy0)) + 1
    s = np.linspace(0.0, 1.0, n)
    xs = np.round(ix0 + s * (ix1 - ix0)).astype(int)
    ys = np.round(iy0 + s * (iy1 - iy0)).astype(int)
    colours = np.round(np.outer(1 - s, colour_start) + np.outer(s, colour_end)).astype(np.uint8)  # (n, 3)
    offsets = range(-(thickness // 2), thickness - thickness // 2)
    for dy in offsets:
        for dx in offsets:
            x, y = xs + dx, ys + dy
            keep = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            image[:, y[keep], x[keep]] = colours[keep].T


def _marker(image: np.ndarray, centre, size: int, colour, shape: str = "square", halo: int = 0) -> None:
    """Filled square or diamond ``size`` pixels wide centred on ``centre`` (image pixel
    coordinates), with an optional dark halo ``halo`` pixels wide around it."""
    _, h, w = image.shape
    side = size + 2 * halo
    x0 = int(np.floor(centre[0] - side / 2 + 0.5))
    y0 = int(np.floor(centre[1] - side / 2 + 0.5))
    rows, cols = _span(y0, y0 + side, h), _span(x0, x0 + side, w)
    if rows is None or cols is None:
        return
    # distances from the marker's centre, in pixels, for the visible part of its bounding square
    dy = np.arange(rows.start, rows.stop)[:, None] + 0.5 - (y0 + side / 2)
    dx = np.arange(cols.start, cols.stop)[None, :] + 0.5 - (x0 + side / 2)
    if shape == "square":
        dist, reach = np.maximum(np.abs(dx), np.abs(dy)), side / 2
    elif shape == "diamond":
        dist, reach = np.abs(dx) + np.abs(dy), side / 2 + 0.5
    else:
        raise ValueError(f"unknown marker shape {shape!r}")
    if halo:
        _paint(image, rows, cols, HALO, 1.0, dist <= reach)
    _paint(image, rows, cols, colour, 1.0, dist <= reach - halo)


def _label(image: np.ndarray, text: str, corner, colour, scale: int) -> None:
    """``text`` (digits) in the 3x5 font scaled by ``scale``, on a dark plate whose top-left
    corner is ``corner``; clipped to the image."""
    _, h, w = image.shape
    glyphs = np.concatenate([np.pad(_GLYPHS[c], ((0, 0), (0, 1))) for c in text], axis=1)[:, :-1]
    glyphs = np.pad(glyphs.repeat(scale, 0).repeat(scale, 1), 1, constant_values=False)
    x0, y0 = int(corner[0]), int(corner[1])
    gh, gw = glyphs.shape
    rows, cols = _span(y0, y0 + gh, h), _span(x0, x0 + gw, w)
    if rows is None or cols is None:
        return
    visible = glyphs[rows.start - y0:rows.stop - y0, cols.start - x0:cols.stop - x0]
    _paint(image, rows, cols, HALO, 0.8)
    _paint(image, rows, cols, colour, 1.0, visible)


# ----------------------------------------------------------------------------- attention paths

def _unit_to_canvas_px(locations, height: int, width: int, dtype: torch.dtype = torch.float64) -> np.ndarray:
    """(T, 2) unit (x, y) -> (T, 2) continuous canvas pixel coordinates (x, y), computed in ``dtype``."""
    loc = torch.as_tensor(_np(locations), dtype=dtype).reshape(-1, 2)
    return torch.stack([unit_to_pixels(loc[:, 0], width), unit_to_pixels(loc[:, 1], height)], 1).numpy()


def retina_box_origins(locations, height: int, width: int, box_width: int) -> np.ndarray:
    """(T, 2) or (2,) unit (x, y) -> (T, 2) int64 (left, top) canvas pixel of the ``box_width``-wide patch the
    retina reads there. In float32, as the retina computes it: float64 would round some centres
    that lie a hair from a half pixel the other way, and draw the box one pixel off."""
    centre_px = _unit_to_canvas_px(locations, height, width, torch.float32)
    return patch_origin(torch.from_numpy(centre_px), box_width).numpy()


def _path_picture(canvas, centres_px: np.ndarray, boxes: list[list[tuple]], upscale: int,
                  labels: bool | None) -> np.ndarray:
    """The canvas with, for step t, the boxes ``boxes[t]`` = [(left, top, right, bottom, thickness,
    opacity), ...] (image pixels, drawn in list order across all steps: coarse first, fine last),
    then the path through ``centres_px`` (canvas pixels), the markers and the step numbers."""
    image = to_rgb_canvas(canvas, upscale)
    _, h, w = image.shape
    steps = len(centres_px)
    colours = time_colours(steps)
    layers = max((len(b) for b in boxes), default=0)
    for layer in range(layers):
        for t in range(steps):
            if layer < len(boxes[t]):
                left, top, right, bottom, thickness, opacity = boxes[t][layer]
                _outline(image, left, top, right, bottom, colours[t], thickness, opacity)

    # path and markers in image pixels, kept inside the image so that edge locations stay visible
    points = np.clip(centres_px * upscale, 0, [w - 1e-6, h - 1e-6])
    line = max(1, upscale // 2)
    halo = 1 if upscale >= 2 else 0
    if halo:
        for t in range(steps - 1):
            _segment(image, points[t], points[t + 1], HALO, HALO, line + 2 * halo)
    for t in range(steps - 1):
        _segment(image, points[t], points[t + 1], colours[t], colours[t + 1], line)
    dot = max(1, upscale // 2 + 1)
    for t in range(1, steps - 1):
        _marker(image, points[t], dot, colours[t], "square", halo)
    big = max(3, 2 * upscale)
    # the end markers are pulled inside the image so that a location on the border still shows them whole
    inside = lambda p, size: np.clip(p, size / 2 + halo, [w - size / 2 - halo, h - size / 2 - halo])  # noqa: E731
    if steps > 1:
        _marker(image, inside(points[-1], big + 2), big + 2, colours[-1], "diamond", halo)
    if steps:
        _marker(image, inside(points[0], big), big, colours[0], "square", halo)

    if labels is None:
        labels = upscale >= 3
    if labels:
        scale = min(3, max(1, upscale // 2))
        for t in range(steps):
            text = str(t + 1)
            tw, th = (4 * len(text) - 1) * scale + 2, 5 * scale + 2
            gap = big // 2 + 2
            x = points[t, 0] + gap if points[t, 0] + gap + tw <= w else points[t, 0] - gap - tw
            y = points[t, 1] - gap - th if points[t, 1] - gap - th >= 0 else points[t, 1] + gap
            _label(image, text, (np.floor(x), np.floor(y)), colours[t], scale)
    return image


def draw_box_path(canvas, centres, widths, upscale: int = 4, labels: bool | None = None,
                  snap_to_retina: bool = False) -> np.ndarray:
    """Where a model looked, step by step: boxes around each centre and the path between them.

    Args:
        canvas: (H, W) uint8, or float in [0, 1].
        centres: (T, 2) unit (x, y) in [-1, 1] (see envs.coords), in step order.
        widths: (T, S) widths in canvas pixels of the S square boxes read at each step, finest
            first (RAM: its k scales; one box for DRAW's filterbank grid or a crop); a NaN width
            is a box not drawn.
        upscale: nearest-neighbour magnification of the canvas.
        labels: number each centre 1..T; default: when ``upscale >= 3``.
        snap_to_retina: place each box on the pixels the retina reads (integer widths, its
            rounding); otherwise a box spans [c - w/2, c + w/2) at the picture's resolution.
    Returns:
        (3, H*upscale, W*upscale) uint8: per step, its boxes in the step's colour (the finest bold,
        the others thin and see-through); the path between consecutive centres; the first centre a
        filled square, the last a filled diamond.
    """
    height, width = _grey_uint8(canvas).shape
    unit = _np(centres).reshape(-1, 2)
    px = _unit_to_canvas_px(unit, height, width)
    widths = _np(widths).astype(np.float64).reshape(len(px), -1)
    boxes = []
    for t, ((cx, cy), step_widths) in enumerate(zip(px, widths)):
        per_step = []
        for s in reversed(range(len(step_widths))):  # coarse first, so that finer boxes are drawn over them
            w, fine = step_widths[s], s == 0
            if not np.isfinite(w):
                continue
            if snap_to_retina:
                left, top = (int(v) * upscale for v in retina_box_origins(unit[t], height, width, int(w))[0])
                right, bottom = left + int(w) * upscale, top + int(w) * upscale
            else:
                left, right = (int(np.floor((cx + d * w / 2) * upscale + 0.5)) for d in (-1, 1))
                top, bottom = (int(np.floor((cy + d * w / 2) * upscale + 0.5)) for d in (-1, 1))
                right, bottom = max(right, left + 1), max(bottom, top + 1)
            per_step.append((left, top, right, bottom, max(1, upscale // 2) if fine else 1,
                             1.0 if fine else _COARSE_OPACITY))
        boxes.append(per_step)
    return _path_picture(canvas, px, boxes, upscale, labels)


def draw_glimpse_path(canvas, locations, glimpse_size: int, n_scales: int, upscale: int = 4,
                      labels: bool | None = None) -> np.ndarray:
    """A glimpse sensor's path (:func:`draw_box_path`): at each of the T ``locations`` (T, 2),
    ``n_scales`` nested boxes ``glimpse_size * 2**s`` wide, exactly over the pixels the retina read."""
    steps = len(_np(locations).reshape(-1, 2))
    widths = np.tile([glimpse_size * 2**s for s in range(n_scales)], (steps, 1))
    return draw_box_path(canvas, locations, widths, upscale, labels, snap_to_retina=True)


# ----------------------------------------------------------------------------- layout

def side_by_side(images, pad: int = 2) -> np.ndarray:
    """(3, h_i, w_i) uint8 images left to right, top-aligned, ``pad`` grey pixels between them."""
    images = [_np(im) for im in images]
    if not images:
        raise ValueError("no images to lay out")
    height = max(im.shape[1] for im in images)
    width = sum(im.shape[2] for im in images) + pad * (len(images) - 1)
    out = np.empty((3, height, width), np.uint8)
    out[:] = PAD[:, None, None]
    x = 0
    for im in images:
        out[:, :im.shape[1], x:x + im.shape[2]] = im
        x += im.shape[2] + pad
    return out


def stack_rows(images, pad: int = 2) -> np.ndarray:
    """(3, h_i, w_i) uint8 images top to bottom, left-aligned, ``pad`` grey pixels between them
    (several validation examples in one TensorBoard image)."""
    images = [_np(im) for im in images]
    if not images:
        raise ValueError("no images to lay out")
    height = sum(im.shape[1] for im in images) + pad * (len(images) - 1)
    width = max(im.shape[2] for im in images)
    out = np.empty((3, height, width), np.uint8)
    out[:] = PAD[:, None, None]
    y = 0
    for im in images:
        out[:, y:y + im.shape[1], :im.shape[2]] = im
        y += im.shape[1] + pad
    return out


def grid(images, columns: int = 4, pad: int = 4) -> np.ndarray:
    """(3, h, w) images laid out ``columns`` per row, row by row."""
    rows = [side_by_side(images[i:i + columns], pad) for i in range(0, len(images), columns)]
    return stack_rows(rows, pad)
