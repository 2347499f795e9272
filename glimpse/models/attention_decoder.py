"""Show-Attend-Tell's decoder: an LSTM with additive (MLP) soft attention over feature cells."""
from __future__ import annotations

import torch
from torch import nn


class AdditiveAttention(nn.Module):
    """e_i = w^T tanh(W_a a_i + W_h h); alpha = softmax_i(e). ``feature_proj`` maps features (B, L, D)
    to W_a a (B, L, A), once per image; forward takes those (B, L, A) and h (B, H) -> alpha (B, L)."""

    def __init__(self, feature_size: int, hidden_size: int, attention_size: int):
        super().__init__()
        self.feature_proj = nn.Linear(feature_size, attention_size)  # W_a
        self.hidden_proj = nn.Linear(hidden_size, attention_size, bias=False)  # W_h
        # w, without a bias: softmax over the cells ignores a shift shared by every score. The bias is
        # made and then dropped, so that the random numbers it drew still go to it: a seed starts
        # every later layer from the weights it always did
        self.score = nn.Linear(attention_size, 1)
        self.score.register_parameter("bias", None)
        self.register_load_state_dict_pre_hook(_drop_shared_score_bias)

    def forward(self, projected_features: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``projected_features`` = feature_proj(features), computed once per image."""
        scores = self.score(torch.tanh(projected_features + self.hidden_proj(h)[:, None, :])).squeeze(-1)
        return torch.softmax(scores, dim=-1)


def _drop_shared_score_bias(module, state_dict, prefix, *_):
    """Checkpoints written before the score lost its bias hold ``score.bias``: a constant added to
    every cell's score, which softmax ignores, so dropping it leaves the attention unchanged."""
    state_dict.pop(f"{prefix}score.bias", None)


class AttentionDecoder(nn.Module):
    """features (B, L, D) -> states h_1..h_T (B, T, H), alpha (B, T, L), beta (B, T).

    h0, c0 = tanh(init_h(mean_i a_i)), tanh(init_c(mean_i a_i)) (Xu et al.'s f_init MLPs, one
    layer each); per step: alpha from (a, h_{t-1}), gate beta = sigmoid(f_beta(h_{t-1})),
    context z = beta * sum_i alpha_i a_i, LSTM step on z.
    """

    def __init__(self, feature_size: int, hidden_size: int, attention_size: int, n_steps: int):
        super().__init__()
        self.n_steps = n_steps
        self.init_h = nn.Linear(feature_size, hidden_size)
        self.init_c = nn.Linear(feature_size, hidden_size)
        self.attention = AdditiveAttention(feature_size, hidden_size, attention_size)
        self.gate = nn.Linear(hidden_size, 1)
        self.cell = nn.LSTMCell(feature_size, hidden_size)

    def forward(self, features: torch.Tensor):
        mean = features.mean(1)
        h, c = torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))
        projected = self.attention.feature_proj(features)  # W_a a_i does not depend on t: once
        states, alphas, betas = [], [], []
        for _ in range(self.n_steps):
            alpha = self.attention(projected, h)
            beta = torch.sigmoid(self.gate(h))
            context = beta * torch.bmm(alpha[:, None, :], features).squeeze(1)
            h, c = self.cell(context, (h, c))
            states.append(h)
            alphas.append(alpha)
            betas.append(beta.squeeze(-1))
        return torch.stack(states, 1), torch.stack(alphas, 1), torch.stack(betas, 1)
