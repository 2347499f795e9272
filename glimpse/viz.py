"""Pictures of where a model looked, for every family, as (3, H, W) uint8 RGB arrays (CHW) for
``SummaryWriter.add_image(..., dataformats="CHW")`` and for the report: one drawing code path.

* :func:`draw_attention`: one canvas and its :class:`glimpse.models.registry.Attention`: boxes
  and the path between their centres (RAM's nested glimpse scales, DRAW's filterbank grid, the
  Spatial Transformer's crop), or one heat map per step (Show-Attend-Tell), with what a hard
  model's sensor returned beside it, titled with the true and predicted label.
* :func:`glimpse_strip` (RAM): what each glimpse saw, as in RAM's Figure 3.
* :func:`overlay_attention` (Show-Attend-Tell): each step's attention map over the canvas.

Primitives, the glimpse-path picture and layouts live in :mod:`envs.render` (environments render
with them too).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from envs.render import (  # noqa: F401 - re-exported: the pictures' building blocks
    PAD, _label, _np, draw_box_path, draw_glimpse_path, grid, side_by_side, stack_rows,
    time_colours, to_rgb_canvas,
)


def draw_attention(canvas, attention, label=None, prediction=None, upscale: int = 4,
                   compact: bool = False) -> np.ndarray:
    """One canvas and where a model looked on it: ``attention`` is one item of a batch's
    :class:`glimpse.models.registry.Attention` (``centres`` (T, 2), ``boxes`` (T, S), ``maps``
    (T, gh, gw), ``glimpses`` (T, k, g, g), each or None). Boxes and their path
    (:func:`draw_box_path`), or one heat map per step (:func:`overlay_attention`), and what a
    hard model's sensor returned beside it; above it all, the true ``label`` (white) and the
    ``prediction`` (green when right, red when wrong), each a digit or a sequence of digits.
    ``compact``: one canvas-sized frame (maps averaged over the steps, no sensor strip), for
    side-by-side galleries."""
    if attention.maps is not None:
        maps = attention.maps.mean(0, keepdim=True) if compact else attention.maps
        picture = overlay_attention(canvas, maps, upscale, cells=attention.map_cells)
    else:
        picture = draw_box_path(canvas, attention.centres, finest_and_last(attention.boxes), upscale,
                                snap_to_retina=attention.snap_to_retina)
        if attention.glimpses is not None and not compact:
            picture = side_by_side([picture, glimpse_grid(attention.glimpses, height=picture.shape[1])])
    if label is None and prediction is None:
        return picture
    return stack_rows([_caption(picture.shape[2], label, prediction, scale=caption_scale(picture.shape[1])),
                       picture], pad=0)


def finest_and_last(boxes):
    """(T, S) box widths -> the same with only the finest box of each step, and every scale of the
    last step (NaN: not drawn): a path that reads at a glance, and what one glimpse covers."""
    if boxes is None:
        return None
    widths = _np(boxes).astype(np.float64).copy()
    widths[:-1, 1:] = np.nan
    return widths


def caption_scale(height: int) -> int:
    """The caption's glyph scale for a picture ``height`` pixels high: digits a fifth of it, so that
    they still read when TensorBoard shrinks the grid of pictures to its card (about 350 pixels
    wide by default: checked with a screenshot, docs/tensorboard-glimpses.png)."""
    return max(2, height // 24)


@torch.no_grad()
def where_it_looks(family, model, task: dict, images: np.ndarray, labels: np.ndarray | None = None,
                   draws: dict | None = None, compact: bool = False) -> list[np.ndarray]:
    """One :func:`draw_attention` picture per canvas of (N, H, W) uint8 ``images``: ``family`` (a
    registered :class:`glimpse.models.registry.Family`) runs ``model`` on them once, as
    evaluation does (``draws``: its random choices, if any). TensorBoard and the report both
    draw through here (the report ``compact``: see :func:`draw_attention`)."""
    look = family.run(model, images, task, draws=draws, record=not compact)
    attention, predictions = look.attention.cpu(), look.logits.argmax(-1).cpu().numpy()
    return [draw_attention(images[i], attention[i], None if labels is None else labels[i], predictions[i],
                           compact=compact) for i in range(len(images))]


def _caption(width: int, label, prediction, scale: int = 2) -> np.ndarray:
    """(3, 5 * scale + 4, width) uint8: the true label in white, then the prediction in green
    (right) or red (wrong)."""
    plate = np.empty((3, 5 * scale + 4, width), np.uint8)
    plate[:] = PAD[:, None, None]
    digits = lambda x: "".join(str(int(d)) for d in np.atleast_1d(_np(x)))  # noqa: E731
    x = 2
    if label is not None:
        _label(plate, digits(label), (x, 1), (255, 255, 255), scale)
        x += (4 * len(digits(label)) + 3) * scale
    if prediction is not None:
        right = label is not None and np.array_equal(np.atleast_1d(_np(label)), np.atleast_1d(_np(prediction)))
        _label(plate, digits(prediction), (x, 1), (60, 220, 60) if right or label is None else (255, 60, 60), scale)
    return plate


# ----------------------------------------------------------------------------- glimpse contents

def glimpse_tile(glimpse) -> np.ndarray:
    """(k, g, g) -> (g*2**(k-1), g*2**(k-1)) float32: each scale upscaled (nearest) back to its
    true width, coarsest at the back, finer scales pasted over its centre (RAM, Figure 3)."""
    glimpse = _np(glimpse).astype(np.float32)
    k, g, _ = glimpse.shape
    side = g * 2 ** (k - 1)
    tile = np.zeros((side, side), np.float32)
    for s in reversed(range(k)):
        size = g * 2**s
        start = (side - size + 1) // 2
        tile[start:start + size, start:start + size] = glimpse[s].repeat(2**s, 0).repeat(2**s, 1)
    return tile


def glimpse_strip(glimpses, upscale: int = 4, sep: int = 2, height: int | None = None,
                  labels: bool | None = None) -> np.ndarray:
    """RAM: what each glimpse saw. ``glimpses`` (T, k, g, g) floats in [0, 1], scale 0 the finest.

    Returns (3, side*upscale, T*side*upscale + (T-1)*sep) uint8 with side = g * 2**(k-1): the T
    tiles of :func:`glimpse_tile` left to right, grey separators between them. ``height``, if
    given, overrides ``upscale`` with the integer magnification that comes closest to it.
    ``labels`` (default: when the magnification is >= 3) writes each step's number, in its
    colour, in the tile's top-left corner, to match the numbers of :func:`draw_glimpse_path`.
    """
    glimpses = _np(glimpses)
    if glimpses.ndim != 4 or glimpses.shape[2] != glimpses.shape[3]:
        raise ValueError(f"glimpses must be (T, k, g, g), got shape {glimpses.shape}")
    tiles = [glimpse_tile(g) for g in glimpses]
    side = glimpses.shape[2] * 2 ** (glimpses.shape[1] - 1)
    if height is not None:
        upscale = max(1, int(round(height / side)))
    pictures = [to_rgb_canvas(tile, upscale) for tile in tiles]
    if labels is None:
        labels = upscale >= 3
    if labels:
        colours = time_colours(len(pictures))
        for t, picture in enumerate(pictures):
            _label(picture, str(t + 1), (0, 0), colours[t], min(3, max(1, upscale // 2)))
    return side_by_side(pictures, pad=sep)


def glimpse_grid(glimpses, height: int, sep: int = 2) -> np.ndarray:
    """RAM: what each glimpse saw, as :func:`glimpse_strip`'s tiles laid out in rows that fill
    ``height`` pixels exactly (two rows from four glimpses on, one below): no empty space beside
    the canvas. Each tile is numbered in its step's colour. Returns (3, height, W) uint8."""
    glimpses = _np(glimpses)
    if glimpses.ndim != 4 or glimpses.shape[2] != glimpses.shape[3]:
        raise ValueError(f"glimpses must be (T, k, g, g), got shape {glimpses.shape}")
    steps = len(glimpses)
    rows = 2 if steps >= 4 else 1
    columns = -(-steps // rows)
    size = (height - (rows - 1) * sep) // rows
    colours = time_colours(steps)
    tiles = []
    for t, glimpse in enumerate(glimpses):
        tile = glimpse_tile(glimpse)
        index = (np.arange(size) * len(tile) // size)  # nearest neighbour to exactly size x size
        picture = to_rgb_canvas(tile[np.ix_(index, index)], 1)
        _label(picture, str(t + 1), (0, 0), colours[t], max(1, size // 20))
        tiles.append(picture)
    blank = np.empty_like(tiles[0])
    blank[:] = PAD[:, None, None]
    tiles += [blank] * (rows * columns - steps)
    grid_rows = [side_by_side(tiles[r * columns:(r + 1) * columns], pad=sep) for r in range(rows)]
    out = stack_rows(grid_rows, pad=sep)
    if out.shape[1] < height:  # the rounding of size: a pixel row or two of padding at the bottom
        out = np.concatenate([out, np.broadcast_to(PAD[:, None, None], (3, height - out.shape[1], out.shape[2]))], 1)
    return np.ascontiguousarray(out[:, :height])


# ----------------------------------------------------------------------------- soft attention maps

def _to_picture(maps: torch.Tensor, h: int, w: int, upscale: int, cells: tuple[float, float] | None) -> np.ndarray:
    """(T, gh, gw) -> (T, h, w): the maps interpolated at every picture pixel's centre, cell i's
    value at its centre (pixels) ``first + i * stride``; beyond the first and last centres, the edge cell's."""
    if cells is None:
        return F.interpolate(maps[:, None], size=(h, w), mode="bilinear", align_corners=False)[:, 0].numpy()
    first, stride = cells
    gh, gw = maps.shape[-2:]

    def axis(n_pixels: int, n_cells: int) -> torch.Tensor:  # grid_sample's [-1, 1] with align_corners=True
        position = ((torch.arange(n_pixels, dtype=torch.float32) + 0.5) / upscale - first) / stride  # in cells
        return position * 2 / max(n_cells - 1, 1) - 1

    y, x = torch.meshgrid(axis(h, gh), axis(w, gw), indexing="ij")
    sample_at = torch.stack([x, y], -1)[None].expand(len(maps), -1, -1, -1)
    return F.grid_sample(maps[:, None], sample_at, mode="bilinear", padding_mode="border", align_corners=True)[:, 0].numpy()


def _heat(m: np.ndarray) -> np.ndarray:
    """(..., H, W) in [0, 1] -> (..., 3, H, W) float in [0, 255]: black -> red -> yellow."""
    return 255.0 * np.stack([np.clip(2 * m, 0, 1), np.clip(2 * m - 1, 0, 1), np.zeros_like(m)], axis=-3)


def overlay_attention(canvas, alpha, upscale: int = 4, sep: int = 2, opacity: float = 0.65,
                      cells: tuple[float, float] | None = None) -> np.ndarray:
    """Show-Attend-Tell: ``alpha`` (T, gh, gw) attention weights, one map per step.

    ``cells`` (centre of the first cell, stride), in canvas pixels, places the cells where the
    model's features are (Show-Attend-Tell's encoder: 3.5 and 8, so its grid does not reach the
    far edges); None spreads gh x gw equal cells over the canvas. Each map is interpolated
    (bilinear) to the picture and blended as heat (black -> red -> yellow) over the grey canvas,
    ``opacity * m`` of heat where m is the weight over the largest weight of all T maps: one scale
    for the image's steps, from zero, so a map spread evenly (untrained attention) is evenly warm, not
    stretched into peaks, and a step that attends less sharply than another looks dimmer. At
    ``upscale >= 3`` each frame carries its step number. Returns (3, H*upscale, T*W*upscale + (T-1)*sep) uint8: the T frames.
    """
    base = to_rgb_canvas(canvas, upscale).astype(np.float32)
    _, h, w = base.shape
    maps = torch.as_tensor(_np(alpha), dtype=torch.float32)
    if maps.dim() != 3:
        raise ValueError(f"alpha must be (T, gh, gw), got shape {tuple(maps.shape)}")
    maps = _to_picture(maps, h, w, upscale, cells)
    peak = float(maps.max()) if maps.size else 0.0
    m = (np.clip(maps, 0.0, None) / peak if peak > 0 else np.zeros_like(maps)).astype(np.float32)
    weight = opacity * m[:, None]
    frames = np.round((1 - weight) * base[None] + weight * _heat(m)).astype(np.uint8)
    if upscale >= 3:  # number the steps, in the colours of the box paths
        colours = time_colours(len(frames))
        for t, frame in enumerate(frames):
            _label(frame, str(t + 1), (0, 0), colours[t], max(1, h // 40))  # legible once TensorBoard shrinks the row
    return side_by_side(list(frames), pad=sep)


