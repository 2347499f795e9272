"""One policy, one objective, two gradients: REINFORCE's estimator against the reparameterised one.

    python scripts/estimator_control.py --data-dir DIR
    python scripts/estimator_control.py --checkpoint runs/NAME/best.pt --samples 2,4,8 --batches 100

The differentiable retina's reparameterised variant (ram-diff) learns where to look from the
gradient of its expected cross-entropy over Gaussian locations, taken through the sampled
locations. REINFORCE's score-function estimator, with the leave-one-out baseline over K
trajectories of each image, is unbiased for the same gradient of the same policy, so at the same
weights and on the same minibatches their noise compares directly, without the reward's 0/1 or
RAM's snapped retina in between. Exact: the undamped backward pass (the gradient both estimate);
as trained: the run's own, damped by --attention-into-core (biased). For the checkpoint's trained weights and for its run's
initialisation (its seed, the policy's std where its schedule starts): the total variance of one
minibatch's estimate of the location head's gradient over --batches minibatches of --batch-size
images (K forward passes each; a 90 % bootstrap interval), the relative variance (trace over the
squared norm of the mean, estimated without bias), and each mean's agreement with the score
function's (about 1 when both estimate one gradient; much larger shows a bias). Results: docs/gradients.md.
Exit code 2 for a bad option or checkpoint.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envs.data import DataError, load_mnist
from glimpse.checkpoint import CheckpointError, load_model
from glimpse.cli import ArgumentParser, check_threads, fail, int_list, interruptible, markdown_table
from glimpse.cpu import configure_cpu
from glimpse.gradient_noise import location_estimator_noise, run_initialisation
from glimpse.models import get_family
from glimpse.report.document import TWO_ESTIMATORS_COLUMNS, two_estimators_rows

DEFAULT = "reports/converged/records/ram-diff-converged-seed0.pt"  # the report's seed 0, weights kept


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=DEFAULT, help=f"a reparameterised ram-diff checkpoint or report "
                        f"record with weights (default {DEFAULT})")
    parser.add_argument("--samples", type=int_list, default=(4,), help="comma-separated K trajectories per image (>= 2)")
    parser.add_argument("--batches", type=int, default=200, help="minibatches per estimate")
    parser.add_argument("--batch-size", type=int, default=32, help="images per minibatch")
    parser.add_argument("--seed", type=int, default=30_000, help="minibatch i is drawn from seed + i")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--data-dir", default=None, help="MNIST root (as in train.py)")
    args = parser.parse_args(argv)
    try:
        counts = args.samples
        if not counts or min(counts) < 2 or max(counts) > 1000:
            raise ValueError(f"--samples must be between 2 and 1000 (the leave-one-out baseline), got {','.join(map(str, counts))}")
        if args.batches < 2 or args.batch_size < 1 or args.seed < 0:
            raise ValueError("--batches must be >= 2, --batch-size >= 1 and --seed >= 0")
        configure_cpu(check_threads(args.threads))
        # the default is named from the clone's root, and found there from any working directory
        trained, payload = load_model(Path(__file__).resolve().parents[1] / DEFAULT if args.checkpoint is DEFAULT
                                      else args.checkpoint)
        if not get_family(payload["kind"]).reparameterised_locations(payload["model_config"]):
            raise ValueError(f"{args.checkpoint} holds a {payload['kind']} model that draws no reparameterised "
                             f"locations (the differentiable retina's reparameterised variant does)")
        data = load_mnist(args.data_dir)
        rows = []
        for weights, model in (("initialisation", run_initialisation(payload)), ("trained", trained)):
            for k in counts:
                result = location_estimator_noise(model, payload["kind"], payload["task"], data.train, k, args.batches,
                                                  args.batch_size, args.seed, show_progress=True)
                rows += two_estimators_rows(weights, k, result)
    except (ValueError, DataError, CheckpointError, OSError) as exc:
        return fail(exc)
    print(f"{args.checkpoint}: {args.batches} minibatches of {args.batch_size} images, each played K times")
    print(markdown_table(TWO_ESTIMATORS_COLUMNS, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
