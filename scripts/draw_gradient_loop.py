"""Does DRAW's gradient explode going back through its attention loop? Per step, at fixed weights.

    python scripts/draw_gradient_loop.py --checkpoint runs/NAME/last.pt --attention-into-core 1 0.3 0.1

Over --batches training minibatches (seeded), for each share S of the attention gradient let
into the LSTM state (--attention-into-core; 1 is the paper): the norm of dL/dh_t at every step t
and the norms of dL/d(raw attention parameters) summed over the steps, each averaged over the
minibatches, and the median and largest norm of the whole gradient (what --grad-clip sees).
The same weights and minibatches serve every S, and the forward pass is the same for all of
them. See ``state_gradient_norms`` in glimpse/models/draw.py.
Exit code 2 for a bad checkpoint or option.
"""
from __future__ import annotations

import argparse
import sys

import torch

from glimpse.cli import ArgumentParser, check_threads, fail, interruptible
from envs.data import DataError, load_mnist
from glimpse.gradient_noise import soft_minibatch
from glimpse.models import get_family, list_families
from glimpse.checkpoint import CheckpointError, load_model
from glimpse.cpu import configure_cpu


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a DRAW checkpoint (best.pt or last.pt of a run)")
    parser.add_argument("--attention-into-core", type=float, nargs="+", default=[1.0, 0.1],
                        help="shares of the attention gradient let into the state, each in [0, 1]")
    parser.add_argument("--batch-size", type=int, default=128, help="images per minibatch")
    parser.add_argument("--batches", type=int, default=10, help="how many minibatches")
    parser.add_argument("--seed", type=int, default=0, help="minibatch i is drawn from seed + i")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    try:
        check_threads(args.threads)
        for name in ("batch_size", "batches"):
            if getattr(args, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
        if any(not 0 <= s <= 1 for s in args.attention_into_core):
            raise ValueError(f"--attention-into-core values must be in [0, 1], got {args.attention_into_core}")
        configure_cpu(args.threads)
        model, payload = load_model(args.checkpoint)
        family = get_family(payload["kind"])
        if family.state_loop is None:
            looped = ", ".join(f.name for f in list_families() if f.state_loop)
            raise ValueError(f"{args.checkpoint} is a {payload['kind']} checkpoint, which has no state -> attention "
                             f"-> state loop; this measures the families that do ({looped}: DRAW's read)")
        data = load_mnist(args.data_dir)
        batches = [soft_minibatch(payload["task"], data.train, args.batch_size, args.seed + i)
                   for i in range(args.batches)]
    except (ValueError, DataError, CheckpointError) as exc:
        return fail(exc)
    steps = payload["model_config"]["n_glimpses"]
    print(f"{args.checkpoint} (trained with {family.state_loop} "
          f"{payload['model_config'].get(family.state_loop, 1.0)}), step {payload.get('step')}, "
          f"{args.batches} minibatches of {args.batch_size} training canvases from seed {args.seed}")
    print("| S | " + " | ".join(f"dL/dh_{t}" for t in range(1, steps + 1))
          + f" | dL/d({', '.join(family.state_loop_parameters)}), summed over steps "
            "| whole gradient: median | largest |")
    print("|---" * (steps + 4) + "|")
    for share in args.attention_into_core:
        runs = [family.state_gradient_norms(model, images, labels, share) for images, labels in batches]
        state = torch.stack([r["state"] for r in runs]).mean(0)
        attention = torch.stack([r["attention"].sum(0) for r in runs]).mean(0)
        whole = torch.stack([r["parameters"] for r in runs])
        print(f"| {share:g} | " + " | ".join(f"{v:,.2f}" for v in state.tolist())
              + " | " + ", ".join(f"{v:,.2f}" for v in attention.tolist())
              + f" | {whole.median().item():,.1f} | {whole.max().item():,.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
