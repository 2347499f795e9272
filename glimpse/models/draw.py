"""DRAW's "differentiable RAM" classifier (Gregor et al. 2015, cluttered MNIST experiment).

An LSTM that at each of T steps chooses a filterbank read from its previous state, reads an
N x N patch from the whole canvas through it, and updates its state; the class comes from the
final state. Attention is soft: every parameter of the read gets an exact gradient.
No training logic here: the trainer applies the loss to ``logits``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from glimpse.models.config_checks import check_fits_task
from glimpse.models.filterbank import attention_params, filterbank_matrices, read
from glimpse.models.gradients import scale_gradient
from glimpse.models.registry import Attention, Family, Option, check_canvas_batch, register


@dataclass
class DRAWConfig:
    """canvas_size: side of the square canvas; read_size: side N of the N x N read; n_glimpses: steps T;
    min_sigma_strides: a floor on the filters' width in strides, which follows the zoom, 0 in the
    paper (see filterbank.attention_params); attention_into_core: the share of the attention
    parameters' gradient let back into the LSTM state, 1 in the paper (see DRAWClassifier).
    ``REMOVED``: options of earlier versions, and the value at which an old checkpoint still loads."""

    REMOVED = {"sigma_units": "pixels", "min_sigma": 0.0}

    canvas_size: int = 60
    read_size: int = 12
    n_glimpses: int = 8
    hidden_size: int = 256
    n_classes: int = 10
    min_sigma_strides: float = 0.0
    attention_into_core: float = 1.0

    def __post_init__(self):
        if not 0 <= self.attention_into_core <= 1:
            raise ValueError(f"attention_into_core must be in [0, 1], got {self.attention_into_core}")
        if not 0 <= self.min_sigma_strides < math.inf:
            raise ValueError(f"min_sigma_strides must be a finite number of strides >= 0, got {self.min_sigma_strides}")
        if not 1 <= self.read_size <= self.canvas_size:  # a read is no larger than the canvas it reads
            raise ValueError(f"read_size must be between 1 and the canvas size ({self.canvas_size}), "
                             f"got {self.read_size}")

    def to_dict(self) -> dict:
        return asdict(self)


class DRAWClassifier(nn.Module):
    """images (B, 1, H, W) in [0, 1] -> dict of ``logits`` (B, C), ``centre`` (B, T, 2) unit (x, y),
    ``stride`` (B, T) pixels, ``sigma2`` (B, T), ``gamma`` (B, T), ``reads`` (B, T, N, N).

    Where to read next is a function of the state, and the read feeds the state: the gradient
    goes round that loop once per step, through the filters' derivative in their centre (in
    pixels per unit coordinate, half the canvas side: 50 on 100x100), and can grow by a factor
    per step. ``attention_into_core`` scales it where it leaves the attention parameters for
    the LSTM state: 1 is the paper (full backpropagation); below 1 the attention head still gets
    the exact gradient through its own step's read, but what that read does to later reads
    reaches it through the state and is damped too (a bias like truncated backpropagation's),
    and the state still learns from every read through the LSTM. The forward pass is the same
    for every setting (like RAM's ``reinforce_into_core``).
    """

    def __init__(self, config: DRAWConfig):
        super().__init__()
        self.config = config
        n, size = config.read_size, config.canvas_size
        self.cell = nn.LSTMCell(n * n, config.hidden_size)
        self.attention = nn.Linear(config.hidden_size, 5)
        self.classifier = nn.Linear(config.hidden_size, config.n_classes)
        # Step 1 (h = 0) reads the bias alone: centred (g~ = 0), grid over the whole canvas
        # (delta~ = 1), sigma = half the stride so neighbouring filters overlap without blurring
        # the whole canvas, gamma = 1. Small weights keep the first moves near that read. A floor
        # near or over half a stride (a read blurred on purpose) leaves the learned part less than
        # a tenth of a stride, in quadrature: it starts there instead (exp(bias) must stay positive).
        stride = (size - 1) / max(n - 1, 1)
        above_floor = (stride / 2) ** 2 - (config.min_sigma_strides * stride) ** 2
        initial_sigma2 = max(above_floor, (stride / 10) ** 2)
        with torch.no_grad():
            self.attention.weight.mul_(0.1)
            self.attention.bias.copy_(torch.tensor([0.0, 0.0, math.log(initial_sigma2), 0.0, 0.0]))

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """images (B, 1, H, W) with H = W = canvas_size -> dict (see the class docstring)."""
        size = self.config.canvas_size
        check_canvas_batch(images, size)
        canvas = images[:, 0]
        batch = canvas.shape[0]
        h = canvas.new_zeros(batch, self.config.hidden_size)
        c = canvas.new_zeros(batch, self.config.hidden_size)
        records = {"centre": [], "stride": [], "sigma2": [], "gamma": [], "reads": []}
        for _ in range(self.config.n_glimpses):
            raw = self.attention(scale_gradient(h, self.config.attention_into_core))
            params = attention_params(raw, size, size, self.config.read_size, self.config.min_sigma_strides)
            f_x, f_y = filterbank_matrices(params, size, size, self.config.read_size)
            patch = read(canvas, f_x, f_y, params.gamma)
            h, c = self.cell(patch.flatten(1), (h, c))  # input: the patch; recurrence: h_{t-1}
            for key, value in (("centre", params.centre), ("stride", params.stride), ("sigma2", params.sigma2),
                               ("gamma", params.gamma), ("reads", patch)):
                records[key].append(value)
        out = {key: torch.stack(values, 1) for key, values in records.items()}
        out["logits"] = self.classifier(h)
        return out


def state_gradient_norms(model: DRAWClassifier, images: torch.Tensor, labels: torch.Tensor,
                         attention_into_core: float | None = None) -> dict[str, torch.Tensor]:
    """images (B, 1, H, W), labels (B,) -> ``state`` (T,): the norm of dL/dh_t over the batch for
    t = 1..T (the cross-entropy of the batch mean); ``attention`` (T, 5): the norm of dL/draw_t for
    each raw attention parameter (g~X, g~Y, log sigma^2, log delta~, log gamma); ``parameters``
    (): the norm of the whole parameter gradient. ``attention_into_core`` overrides the model's
    for this measurement only; the weights and their ``.grad`` are left as they were."""
    config = model.config
    probe = DRAWClassifier(replace(
        config, attention_into_core=config.attention_into_core if attention_into_core is None else attention_into_core))
    probe.to(next(model.parameters())).load_state_dict(model.state_dict())  # the model's device and dtype
    states, raws = [], []

    def keep_state(_module, _inputs, output):
        output[0].retain_grad()
        states.append(output[0])

    def keep_raw(_module, _inputs, output):
        output.retain_grad()
        raws.append(output)

    probe.cell.register_forward_hook(keep_state)
    probe.attention.register_forward_hook(keep_raw)
    F.cross_entropy(probe(images)["logits"], labels).backward()
    grads = [p.grad.flatten() for p in probe.parameters() if p.grad is not None]
    return {"state": torch.stack([h.grad.norm() for h in states]),
            "attention": torch.stack([r.grad.norm(dim=0) for r in raws]),
            "parameters": torch.cat(grads).norm()}


@register
class DRAWFamily(Family):
    name = "draw"
    title = "DRAW read (soft)"
    mode = "soft"
    Config = DRAWConfig
    Model = DRAWClassifier
    options = ("n_glimpses", "hidden_size", "read_size", "draw_min_sigma_strides", "attention_into_core")
    report_epochs = 6
    quick_recipe = {"preset": "mnist28", "epochs": 3, "batch_size": 64, "lr": 3e-3}
    quick_floor = 0.6
    converged_epochs = 480  # the shipped draw-cluttered60 run: 0.12 points gained over its last 20 %
    attention_module_text = "the Linear layer that emits the filterbank parameters"
    report_sweep = True
    state_loop = "attention_into_core"
    state_loop_parameters = ("centre x", "centre y", "log sigma^2", "log stride", "log gamma")  # raw g~X, g~Y, ...
    own_options = {
        "read_size": Option(12, "side N of the N x N filterbank read", low=1),
        "draw_min_sigma_strides": Option(0.0, "smooth floor on the filters' sigma in strides, so it follows the zoom "
                                         "(0: none, the paper): zoomed-in reads cannot point-sample the "
                                         "image and alias", low=0),
        "attention_into_core": Option(1.0, "share of the gradient of the attention parameters that flows back into "
                                      "the LSTM state (1: the paper); the head's gradient through its own read stays exact, through later reads it is damped too. "
                                      "Below 1 it damps the loop state -> read -> state that explodes on 100x100 "
                                      "(docs/gradients.md)", low=0, high=1),
    }

    def model_config(self, config) -> dict:
        return DRAWConfig(canvas_size=config.canvas_size, read_size=config.read_size, n_glimpses=config.n_glimpses,
                          hidden_size=config.hidden_size, min_sigma_strides=config.draw_min_sigma_strides,
                          attention_into_core=config.attention_into_core).to_dict()

    def attention(self, outputs: dict, task: dict) -> Attention:
        """Each read's grid centre, and its width N * stride in pixels."""
        read_size = outputs["reads"].shape[-1]
        return Attention(outputs["centre"], (outputs["stride"] * read_size)[..., None])

    def training_terms(self, look, config):
        return None, {"train/filterbank_stride": look.outputs["stride"].detach().mean()}

    def pixels_read(self, task: dict, model_config: dict) -> dict[str, int]:
        """Every Gaussian filter has weight on every pixel, so each of the T reads touches the whole
        canvas; the LSTM receives T * N * N filterbank outputs."""
        config = self.config(model_config)
        check_fits_task(config, task)
        area = int(task["canvas_size"]) ** 2
        return {"sensor_values": config.n_glimpses * config.read_size ** 2,
                "canvas_pixels_touched": config.n_glimpses * area, "input_pixels": area}

    def attention_module(self, model: nn.Module) -> nn.Module:
        return model.attention

    def sensor_and_gradient(self, train_config: dict) -> tuple[str, str]:
        return "filterbank: Gaussian filters over the whole canvas", "backpropagation"

    def state_gradient_norms(self, model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                             share: float | None = None) -> dict[str, torch.Tensor]:
        """:func:`state_gradient_norms`: dL/dh_t per step through DRAW's state -> read -> state loop."""
        return state_gradient_norms(model, images, labels, share)
