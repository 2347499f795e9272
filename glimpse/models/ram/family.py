"""RAM as a family of the registry, the default of ``--mode hard``.

RAM learns by REINFORCE through the environment; what it shares with every hard family (its
episode, sampled evaluation, the retina's cost) is :class:`glimpse.models.hard.HardFamily`'s. Its
model follows the step protocol of :mod:`glimpse.models.episodes`.
"""
from __future__ import annotations

from glimpse.models.hard import HardFamily
from glimpse.models.ram.model import RAMConfig, RecurrentAttentionModel
from glimpse.models.registry import Option, register


@register
class RAMFamily(HardFamily):
    name = "ram"
    title = "RAM (hard, REINFORCE)"
    default_for_mode = True
    Config = RAMConfig
    Model = RecurrentAttentionModel
    options = ("glimpse_size", "n_scales", "n_glimpses", "first_location", "core", "glimpse_net", "hidden_size", "location_std",
               "location_std_final", "random_glimpses", "reinforce_into_core", "reinforce_samples",
               "reinforce_reward", "context_size")
    paper_error = "4.08 (6 glimpses)"
    report_epochs = 20
    # its short run that learns is tests/test_training.py's, which also reads its TensorBoard logs
    report_sweep = True
    report_estimators = True
    paper_sweep = ((4, 4.96), (6, 4.08), (8, 4.04))  # Mnih et al. 2014, 60x60 cluttered
    converged_recipe = {"core": "lstm", "glimpse_net": "conv", "location_std": 0.25, "location_std_final": 0.1,
                        "reinforce_into_core": 0.1, "reinforce_samples": 4}
    converged_epochs = 80  # 44 epochs still gained 0.44-0.52 points over their last 20 %
    report_baselines = {"random": ("RAM, random glimpses", {"random_glimpses": True, "first_location": "random"},
                                   "14.4 (8 random glimpses)")}  # Mnih et al. 2014, 60x60 cluttered
    added_modules = ("context_network",)
    own_options = {
        "core": Option("rnn", "core network, the paper's ReLU RNN or an LSTM", ("rnn", "lstm")),
        "glimpse_net": Option("linear", "the glimpse network's \"what\" pathway: the paper's linear layer on the "
                              "flattened glimpse, or conv, two 3x3 conv layers with max-pooling (the lab's own; "
                              "DRAM's is convolutional too; --glimpse-size divisible by 4)", ("linear", "conv")),
        "random_glimpses": Option(False, "glimpse at uniformly random locations instead of learned ones (the paper's "
                                  "random-glimpse baseline: no policy, no REINFORCE)"),
    }

    def run_label(self, config) -> str:
        return f"{self.name}-random-glimpses" if config.random_glimpses else self.name

    def leaves_parameters_unused(self, config) -> bool:
        return config.random_glimpses or super().leaves_parameters_unused(config)  # random glimpses: no policy

    def model_config(self, config) -> dict:
        return RAMConfig(
            glimpse_size=config.glimpse_size, n_scales=config.n_scales, n_glimpses=config.n_glimpses,
            hidden_size=config.hidden_size, core=config.core, glimpse_net=config.glimpse_net,
            # annealed: the checkpoint records the std the policy ends with (what --samples draws with)
            location_std=config.location_std_final or config.location_std,
            reinforce_into_core=config.reinforce_into_core,
            policy="random" if config.random_glimpses else "learned", context_size=config.context_size,
        ).to_dict()
