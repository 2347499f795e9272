"""The shipped checkpoints load with weights_only=True, rebuild their model and classify."""
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.engine import fixed_canvas_set
from glimpse.inference import predict_probabilities, read_right
from glimpse.checkpoint import load_model

SHIPPED = sorted((Path(__file__).resolve().parents[1] / "checkpoints").glob("*.pt"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_checkpoint_classifies_test_canvases(path, bundled):
    raw = torch.load(path, map_location="cpu", weights_only=True)
    assert {"kind", "model_config", "task", "model_state", "train_config", "data_source"} <= raw.keys()
    assert "bundled" not in raw["data_source"], "shipped models are trained on the full training set"
    model, checkpoint = load_model(path)
    task = checkpoint["task"]
    canvases = fixed_canvas_set(bundled.test.images[:200], bundled.test.labels[:200], task["canvas_size"],
                                task["n_clutter"], task["centred_digit"], seed=0, n_digits=task.get("n_digits", 1))
    probs = predict_probabilities(checkpoint["kind"], model, task, canvases.images, batch_size=100)
    accuracy = float(read_right(probs.argmax(-1).numpy(), canvases.labels).mean())
    assert accuracy > 0.5, accuracy  # every shipped model is far above chance (0.1; 0.01 for two digits)
    np.testing.assert_allclose(probs.sum(-1).numpy(), 1.0, rtol=1e-5)
