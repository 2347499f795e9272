"""The report's figures, as PNG files: learning curves, accuracy against the number of
glimpses, and where each model looks on the same test canvases."""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402
import numpy as np  # noqa: E402

from glimpse.report.measurements import SeedRuns  # noqa: E402

LABEL_WIDTH = 22  # characters per line of a gallery row's label

# each report group a colour family; its models shades of it, each with a line style, so that no two
# of a group's lines look alike however many models it holds
GROUP_COLOURS = {"hard": plt.cm.Reds, "soft": plt.cm.Blues, "baseline": plt.cm.Greys}
STYLES = ["-", "--", ":", "-."]


def _curve(run: dict, x: str) -> tuple[np.ndarray, np.ndarray]:
    history = run.get("history", [])
    return np.array([h[x] for h in history]), np.array([100 * (1 - h["val_accuracy"]) for h in history])


def _log_percent_axis(ax) -> None:
    ax.set_yscale("log")
    plain = FuncFormatter(lambda y, _: f"{y:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.grid(True, which="both", alpha=0.3)


def estimator_curves(curves: list[tuple[str, SeedRuns]], seconds_per_epoch: dict[str, float], path: Path,
                     model: str) -> None:
    """Validation error against training time for each REINFORCE estimator (one run each) of ``model``
    (its title), time measured as in :func:`learning_curves`: equal wall-clock on one machine."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, group) in enumerate(curves):
        epochs, error = _curve(group.runs[0], "epoch")
        ax.plot(epochs * seconds_per_epoch[group.experiment.name] / 60, error, label=label, linewidth=1.5,
                color=plt.cm.viridis(i / max(1, len(curves) - 1)))
    ax.set_xlabel("training minutes (measured speed, 1 process, this machine)")
    ax.set_ylabel("validation error % (log scale)")
    _log_percent_axis(ax)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"{model} on 60x60 cluttered MNIST:\nREINFORCE's baselines at equal wall-clock")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def learning_curves(groups: list[SeedRuns], seconds_per_epoch: dict[str, float], path: Path) -> None:
    """Validation error against epochs and against training time, every seed a line. Time is
    epochs times the seconds per epoch measured side by side in one process (``seconds_per_epoch``
    by experiment name), so that runs that shared the cores with others compare fairly."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    sizes = {kind: sum(g.experiment.group == kind for g in groups) for kind in GROUP_COLOURS}
    seen = dict.fromkeys(GROUP_COLOURS, -1)
    for group in groups:
        kind = group.experiment.group
        seen[kind] += 1
        colour = GROUP_COLOURS[kind](0.85 - 0.4 * seen[kind] / max(1, sizes[kind] - 1))  # dark to light
        style = STYLES[seen[kind] % len(STYLES)]
        for i, run in enumerate(group.runs):
            epochs, error = _curve(run, "epoch")
            label = group.experiment.label if i == 0 else None
            kw = dict(color=colour, linestyle=style, alpha=0.9, linewidth=1.4, label=label)
            axes[0].plot(epochs, error, **kw)
            axes[1].plot(epochs * seconds_per_epoch[group.experiment.name] / 60, error, **kw)
    for ax, xlabel in zip(axes, ("epochs", "training minutes (measured speed, 1 process, this machine)")):
        ax.set_xlabel(xlabel)
        _log_percent_axis(ax)
        for level in (10, 5):
            ax.axhline(level, color="black", linewidth=0.6, alpha=0.4)
    axes[0].set_ylabel("validation error % (log scale)")
    axes[1].legend(fontsize=8, loc="upper right")
    fig.suptitle("Learning curves on 60x60 cluttered MNIST (every seed; lines at 10 % and 5 % error)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def glimpse_sweep(rows: dict[str, list[tuple[int, float]]], paper: dict[str, list[tuple[int, float]]],
                  path: Path) -> None:
    """Test error against the number of glimpses: ours (lines) and the papers' (markers)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, points), colour in zip(rows.items(), ("tab:red", "tab:blue", "tab:green")):
        if points:
            counts, errors = zip(*points)
            ax.plot(counts, errors, "o-", color=colour, label=f"{name} (this lab)")
        if paper.get(name):
            counts, errors = zip(*paper[name])
            ax.plot(counts, errors, "s", color=colour, markerfacecolor="none", markersize=9, label=f"{name} (paper)")
    ax.set_xlabel("number of glimpses")
    ax.set_ylabel("test error % (log scale)")
    _log_percent_axis(ax)
    ax.legend(fontsize=8)
    ax.set_title("Accuracy against the number of glimpses, 60x60 cluttered MNIST")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def attention_gallery(rows: list[tuple[str, list[np.ndarray]]], labels: np.ndarray, path: Path) -> None:
    """A grid: one row per model, one column per test canvas."""
    n_rows, n_cols = len(rows), len(rows[0][1])
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.1 * n_cols, 2.25 * n_rows), squeeze=False)
    for r, (name, pictures) in enumerate(rows):
        for c, picture in enumerate(pictures):
            ax = axes[r][c]
            ax.imshow(np.transpose(picture, (1, 2, 0)))
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:  # wrapped: a long label would run past the figure's edge
                ax.set_ylabel(textwrap.fill(name, LABEL_WIDTH, break_on_hyphens=False), fontsize=9)
            if r == 0:
                ax.set_title(f"digit {labels[c]}", fontsize=9)
    fig.suptitle("Where each model looks, same test canvases (boxes: first step cyan ... last red; "
                 "maps: averaged over the steps; above: true and predicted label)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
