import numpy as np
import pytest
import torch

from envs.coords import pixels_to_unit
from envs.retina import extract_glimpses, integral_images
from glimpse.viz import (
    draw_box_path,
    PAD,
    draw_glimpse_path,
    glimpse_strip,
    glimpse_tile,
    overlay_attention,
    side_by_side,
    stack_rows,
    time_colours,
    to_rgb_canvas,
)


def coloured(image: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels that are not grey, i.e. were drawn on (the canvas itself is grey)."""
    return ~((image[0] == image[1]) & (image[1] == image[2]))


def square_mask(shape, left, top, width, filled=False) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[top:top + width, left:left + width] = True
    if not filled and width > 2:
        mask[top + 1:top + width - 1, left + 1:left + width - 1] = False
    return mask


def test_to_rgb_canvas_accepts_uint8_float_and_tensors():
    canvas = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    out = to_rgb_canvas(canvas, 2)
    assert out.shape == (3, 6, 8) and out.dtype == np.uint8
    assert (out[:, ::2, ::2] == canvas).all() and (out[0] == out[2]).all()
    np.testing.assert_array_equal(to_rgb_canvas(canvas.astype(np.float32) / 255, 2), out)
    np.testing.assert_array_equal(to_rgb_canvas(torch.from_numpy(canvas), 2), out)


def test_time_colours_run_from_early_to_late_and_are_never_grey():
    colours = time_colours(8)
    assert colours.shape == (8, 3) and colours.dtype == np.uint8
    assert not (colours == colours[:, :1]).all(axis=1).any()
    assert len({tuple(c) for c in colours}) == 8
    assert time_colours(1).shape == (1, 3)


def test_box_is_exactly_where_the_brief_says():
    # 20x20, g = 4, centre (0, 0) -> pixel 10 -> columns/rows 8..11; first marker 3 px wide: 9..11
    canvas = np.zeros((20, 20), np.uint8)
    out = draw_glimpse_path(canvas, np.array([[0.0, 0.0]]), glimpse_size=4, n_scales=1, upscale=1)
    assert out.shape == (3, 20, 20) and out.dtype == np.uint8
    expected = square_mask((20, 20), 8, 8, 4) | square_mask((20, 20), 9, 9, 3, filled=True)
    np.testing.assert_array_equal(coloured(out), expected)
    assert (out[:, 8, 8] == time_colours(1)[0]).all()
    # a coarser scale: width 8 -> 6..13, see-through over the canvas but still coloured
    out = draw_glimpse_path(canvas, np.array([[0.0, 0.0]]), glimpse_size=4, n_scales=2, upscale=1)
    np.testing.assert_array_equal(coloured(out), expected | square_mask((20, 20), 6, 6, 8))


@pytest.mark.parametrize("upscale", [1, 3])
def test_boxes_cover_exactly_what_the_retina_reads(upscale):
    rng = np.random.default_rng(0)
    height, width, g = 30, 40, 5
    for loc in rng.uniform(-0.6, 0.6, (6, 2)):
        out = draw_glimpse_path(np.zeros((height, width), np.uint8), loc[None], g, 1, upscale=upscale, labels=False)
        rows, cols = np.nonzero(coloured(out))
        top, left = rows.min() // upscale, cols.min() // upscale
        assert (rows.max() + 1) // upscale - top == g and (cols.max() + 1) // upscale - left == g
        inside = np.zeros((1, height, width), np.uint8)
        inside[0, top:top + g, left:left + g] = 255
        loc_t = torch.tensor(loc[None], dtype=torch.float32)
        read_inside = extract_glimpses(integral_images(torch.from_numpy(inside)), loc_t, g, 1)
        read_outside = extract_glimpses(integral_images(torch.from_numpy(255 - inside)), loc_t, g, 1)
        assert (read_inside == 1).all() and (read_outside == 0).all()


def test_a_box_is_where_the_retina_read_even_a_hair_from_a_half_pixel():
    """x = 0.8166666 (float32) on 60 pixels: (x + 1) * 30 is 54.49999 in float32, the retina's arithmetic,
    and 54.5 in float64; the box must follow the retina (columns 51..58), not the float64 rounding."""
    loc = np.array([[np.float32(0.8166666030883789), 0.0]], np.float32)
    canvas = np.zeros((1, 60, 60), np.uint8)
    canvas[0, :, 51] = 255  # the first column the retina reads
    read = extract_glimpses(integral_images(torch.from_numpy(canvas)), torch.from_numpy(loc), 8, 1)
    assert read[0, 0, :, 0].sum() > 0 and read[0, 0, :, 1:].sum() == 0
    cols = np.nonzero(coloured(draw_glimpse_path(canvas[0] * 0, loc, 8, 1, upscale=1, labels=False)))[1]
    assert (cols.min(), cols.max()) == (51, 58)


def test_a_box_wider_than_the_canvas_is_drawn_along_its_edges():
    """DRAW's read starts wider than the canvas: its box shows as the canvas's border, not as nothing."""
    drawn = coloured(draw_box_path(np.zeros((20, 20), np.uint8), np.zeros((1, 2)), np.full((1, 1), 30.0),
                                   upscale=1, labels=False))
    assert drawn[0].all() and drawn[-1].all() and drawn[:, 0].all() and drawn[:, -1].all()
    # a box that only runs off one side (a coarse scale at the edge) stays open there
    drawn = coloured(draw_box_path(np.zeros((20, 20), np.uint8), np.array([[-1.0, 0.0]]), np.full((1, 1), 8.0),
                                   upscale=1, labels=False))
    assert drawn[6:14, 3].all() and not drawn[7:9, 0].any()  # its right side drawn, its left off the canvas


def test_path_connects_the_centres():
    canvas = np.zeros((40, 40), np.uint8)
    # centres at pixels (10, 20) and (30, 20): the whole row between them is drawn
    out = draw_glimpse_path(canvas, np.array([[-0.5, 0.0], [0.5, 0.0]]), 1, 1, upscale=1)
    assert coloured(out)[20, 10:31].all()
    # colours run from the first step's to the last's
    early, late = time_colours(2).astype(int)
    assert np.abs(out[:, 20, 14] - early).sum() < np.abs(out[:, 20, 14] - late).sum()
    assert np.abs(out[:, 20, 26] - late).sum() < np.abs(out[:, 20, 26] - early).sum()
    # a steep segment: every row between the centres has a drawn pixel next to the ideal line
    start, end = np.array([8.0, 5.0]), np.array([15.0, 35.0])
    locs = pixels_to_unit(torch.tensor(np.stack([start, end])), 40).numpy()
    drawn = coloured(draw_glimpse_path(canvas, locs, 1, 1, upscale=1))
    for row in range(5, 36):
        x = start[0] + (row - start[1]) * (end[0] - start[0]) / (end[1] - start[1])
        assert drawn[row, int(np.floor(x)) - 1:int(np.floor(x)) + 2].any(), row


@pytest.mark.parametrize("upscale", [1, 4])
def test_locations_on_the_border_are_clipped_not_raised(upscale):
    corners = np.array([[-1.0, -1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]])
    out = draw_glimpse_path(np.zeros((20, 20), np.uint8), corners, 4, 3, upscale=upscale)
    assert out.shape == (3, 20 * upscale, 20 * upscale)
    drawn = coloured(out)
    edge = 2 * upscale
    for rows, cols in [(slice(0, edge), slice(0, edge)), (slice(-edge, None), slice(-edge, None)),
                       (slice(0, edge), slice(-edge, None)), (slice(-edge, None), slice(0, edge))]:
        assert drawn[rows, cols].any()
    out = draw_box_path(np.zeros((20, 20)), corners, np.full((5, 1), 30.0), upscale=upscale)  # one box a step
    assert out.shape == (3, 20 * upscale, 20 * upscale)


def test_readable_picture_has_the_canvas_size_for_many_steps():
    rng = np.random.default_rng(1)
    canvas = rng.random((60, 60)).astype(np.float32)
    out = draw_glimpse_path(canvas, torch.tensor(rng.uniform(-1, 1, (8, 2))), 8, 3)
    assert out.shape == (3, 240, 240) and out.dtype == np.uint8


def test_one_box_per_step_as_drawn_for_a_filterbank_or_a_crop():
    canvas = np.zeros((20, 20), np.uint8)
    out = draw_box_path(canvas, np.array([[0.0, 0.0]]), np.array([[8.0]]), upscale=1)
    assert out.shape == (3, 20, 20) and out.dtype == np.uint8
    expected = square_mask((20, 20), 6, 6, 8) | square_mask((20, 20), 9, 9, 3, filled=True)
    np.testing.assert_array_equal(coloured(out), expected)
    out = draw_box_path(canvas, np.array([[0.1, -0.3], [0.2, 0.4]]), np.array([[5.3], [2.2]]), upscale=4)
    assert out.shape == (3, 80, 80)


def test_glimpse_tile_pastes_finer_scales_over_the_centre():
    k, g = 3, 4
    glimpse = np.stack([np.full((g, g), 0.1 * (s + 1)) for s in range(k)])
    tile = glimpse_tile(glimpse)
    assert tile.shape == (16, 16)
    np.testing.assert_allclose(tile[6:10, 6:10], 0.1)
    np.testing.assert_allclose(tile[4:12, 4], 0.2)
    np.testing.assert_allclose(tile[0], 0.3)


@pytest.mark.parametrize("upscale", [1, 2, 4])
def test_glimpse_strip_tile_sizes(upscale):
    steps, k, g = 5, 3, 4
    glimpses = np.random.default_rng(0).random((steps, k, g, g)).astype(np.float32)
    out = glimpse_strip(glimpses, upscale=upscale)
    side = g * 2 ** (k - 1) * upscale
    assert out.shape == (3, side, steps * side + (steps - 1) * 2) and out.dtype == np.uint8
    plain = glimpse_strip(glimpses, upscale=upscale, labels=False)
    assert (plain[:, :, side:side + 2] == PAD[:, None, None]).all()
    np.testing.assert_array_equal(plain[0, :, :side], to_rgb_canvas(glimpse_tile(glimpses[0]), upscale)[0])
    assert glimpse_strip(torch.from_numpy(glimpses), height=64).shape[1] == 64


def test_overlay_of_one_hot_attention_is_brightest_at_its_cell():
    canvas, upscale = np.zeros((20, 20), np.uint8), 2
    alpha = np.zeros((2, 5, 5), np.float32)
    alpha[0, 1, 3] = alpha[1, 4, 0] = 1.0
    out = overlay_attention(canvas, alpha, upscale=upscale)
    frame = 20 * upscale
    assert out.shape == (3, frame, 2 * frame + 2) and out.dtype == np.uint8
    cell = frame // 5
    for t, (row, col) in enumerate([(1, 3), (4, 0)]):
        brightness = out[:, :, t * (frame + 2):t * (frame + 2) + frame].astype(int).sum(0)
        y, x = np.unravel_index(brightness.argmax(), brightness.shape)
        assert row * cell <= y < (row + 1) * cell and col * cell <= x < (col + 1) * cell
    # one scale from zero for all steps: a map spread evenly is evenly warm (not stretched into peaks), a
    # step attending half as sharply as another is dimmer, and no weight at all leaves the canvas alone
    black = np.zeros((20, 20), np.uint8)
    even = overlay_attention(black, np.full((1, 4, 4), 1 / 16) + np.linspace(0, 1e-4, 16).reshape(1, 4, 4), upscale=1)
    assert even[0].min() > 0 and np.ptp(even.astype(int), axis=(1, 2)).max() <= 1  # red everywhere, evenly
    sharp, half = (overlay_attention(black, np.eye(4)[None, None, 0].reshape(1, 1, 4) * w, upscale=1).astype(int).sum()
                   for w in (1.0, 0.5))
    two_steps = overlay_attention(black, np.stack([np.eye(4)[:1] * 1.0, np.eye(4)[:1] * 0.5]), upscale=1)
    assert two_steps[:, :, :20].astype(int).sum() > two_steps[:, :, 22:].astype(int).sum() > 0
    assert sharp == half  # alone, a map is its own scale
    grey = np.random.default_rng(0).integers(0, 256, (20, 20), dtype=np.uint8)
    np.testing.assert_array_equal(overlay_attention(grey, np.zeros((1, 3, 3)), upscale=1), to_rgb_canvas(grey, 1))


def test_show_attend_tell_cells_are_drawn_over_the_pixels_its_features_centre_on():
    """Its encoder's cell i is centred at 8 i + 3.5 px, so a 7 x 7 grid spans 3.5..51.5 of a 60 px
    canvas: a one-hot map peaks on that pixel, not stretched to the far edge."""
    from glimpse.models import get_family
    from glimpse.models.sat_encoder import ConvEncoder

    attention = get_family("sat").attention({"alpha": torch.full((1, 2, 7, 7), 1 / 49)}, {"canvas_size": 60})
    assert attention.map_cells == (3.5, 8.0) and attention[0].map_cells == attention.cpu().map_cells
    centres = ConvEncoder.cell_centres(7)
    for upscale in (1, 3):
        for row, col in [(6, 6), (1, 5), (3, 2)]:
            alpha = np.zeros((1, 7, 7), np.float32)
            alpha[0, row, col] = 1.0
            out = overlay_attention(np.zeros((60, 60), np.uint8), alpha, upscale=upscale, cells=attention.map_cells)
            red = out[0].astype(int)
            red[:8 * upscale, :8 * upscale] = 0  # the step number's glyph, drawn at upscale >= 3
            y, x = np.unravel_index(red.argmax(), red.shape)
            assert (y + 0.5) / upscale == pytest.approx(float(centres[row]), abs=0.5 / upscale + 1e-6)
            assert (x + 0.5) / upscale == pytest.approx(float(centres[col]), abs=0.5 / upscale + 1e-6)


def test_stack_rows_and_side_by_side_layout():
    a = np.full((3, 4, 6), 200, np.uint8)
    b = np.full((3, 5, 3), 100, np.uint8)
    out = stack_rows([a, b], pad=2)
    assert out.shape == (3, 11, 6) and out.dtype == np.uint8
    assert (out[:, :4] == 200).all() and (out[:, 4:6] == PAD[:, None, None]).all()
    assert (out[:, 6:, :3] == 100).all() and (out[:, 6:, 3:] == PAD[:, None, None]).all()  # left-aligned
    out = side_by_side([a, b], pad=1)
    assert out.shape == (3, 5, 10)
    assert (out[:, 4, :6] == PAD[:, None]).all() and (out[:, :, 7:] == 100).all()


def test_draw_attention_titles_the_picture_with_the_true_and_predicted_label():
    from glimpse.models import Attention
    from glimpse.viz import draw_attention

    canvas = np.zeros((20, 20), np.uint8)
    boxes = Attention(centres=torch.zeros(2, 2), boxes=torch.full((2, 1), 8.0))
    plain = draw_attention(canvas, boxes)
    right, wrong = draw_attention(canvas, boxes, 3, 3), draw_attention(canvas, boxes, 3, 5)
    caption = right.shape[1] - plain.shape[1]
    assert caption > 0 and right.shape[2] == plain.shape[2]
    np.testing.assert_array_equal(right[:, caption:], plain)  # the caption sits above the same picture
    green = (right[:, :caption] == np.array([60, 220, 60], np.uint8)[:, None, None]).all(0).sum()
    red = (wrong[:, :caption] == np.array([255, 60, 60], np.uint8)[:, None, None]).all(0).sum()
    assert green > 0 and red > 0
    maps = Attention(centres=torch.zeros(3, 2), maps=torch.rand(3, 4, 4))
    assert draw_attention(canvas, maps).shape == (3, 80, 3 * 80 + 2 * 2)  # one frame per step


def test_a_path_reads_at_a_glance_the_finest_box_of_each_glimpse_and_every_scale_of_the_last():
    from glimpse.viz import finest_and_last

    widths = np.tile([12.0, 24.0, 48.0], (6, 1))
    drawn = finest_and_last(widths)
    assert (drawn[:, 0] == 12).all() and np.isnan(drawn[:-1, 1:]).all() and (drawn[-1] == [12, 24, 48]).all()
    # a NaN width is a box not drawn: only the finest box, where three were
    canvas = np.zeros((40, 40), np.uint8)
    one = draw_box_path(canvas, np.zeros((1, 2)), np.array([[8.0, np.nan, np.nan]]), upscale=1, labels=False)
    assert (coloured(one) == coloured(draw_box_path(canvas, np.zeros((1, 2)), np.array([[8.0]]), upscale=1,
                                                     labels=False))).all()


@pytest.mark.parametrize("steps", [1, 3, 6, 8])
def test_the_glimpses_beside_the_canvas_fill_its_height_with_no_empty_rows(steps):
    from glimpse.viz import glimpse_grid

    glimpses = np.random.default_rng(0).random((steps, 3, 12, 12)).astype(np.float32)
    out = glimpse_grid(glimpses, height=240)
    assert out.shape[0] == 3 and out.shape[1] == 240 and out.dtype == np.uint8
    rows = 2 if steps >= 4 else 1
    assert out.shape[2] < (-(-steps // rows)) * 240 / rows + 16  # as wide as its tiles, no wider
    grey = (out == PAD[:, None, None]).all(0)
    assert grey.all(1).sum() <= 3  # at most the separator and a rounding row are all grey


def test_the_caption_grows_with_the_picture():
    from glimpse.viz import caption_scale

    assert caption_scale(240) == 10 and caption_scale(48) == 2 and caption_scale(480) == 20
