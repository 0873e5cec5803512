"""The six models of the discrete-retrieval paper (its Section 4, Figure 2 and appendix).

    from harness.baselines.models import ModelConfig, build_model
    model = build_model(ModelConfig(kind="t-pos+att"))
    logits, attention = model(vectors, query)  # [batch], [batch, n] decoder attention

Inputs are the native form: `vectors` float [batch, n, 36] (1 = active feature), `query`
float [batch, 36]. Every model embeds the input vectors (W_in, 36 -> 100) and the query
(W_q, then ReLU), builds token representations h_1..h_n, reads them with the query, and
answers through an MLP: ReLU((c || emb_q) W_o1) W_o2, then a sigmoid (the loss takes the
logit). Kinds:

    t-pos-att   h = emb_in                              (decoder attention only)
    t+pos-att   h = emb_in + PosEnc                      (sinusoidal, Vaswani et al.)
    t-pos+att   h = TransfEnc(emb_in)                    (one causal layer, one head)
    t+pos+att   h = TransfEnc(emb_in + PosEnc)           (the full Transformer)
    lstm        h = LSTM(emb_in); c = h_n                (no decoder attention)
    lstm+att    h = LSTM(emb_in); c = decoder attention over h

Decoder attention: alpha_i = softmax_i(h_i . emb_q), c = sum_i alpha_i h_i (dot product, as
the appendix writes it). TransfEnc is PyTorch's encoder layer (self-attention, residual,
layer norm, feed-forward of `ffn_dim`), the paper's "TransformerEncoder cell ... as defined in
Vaswani et al.", with a causal mask so that token i sees tokens 1..i only (incremental
processing: the query is unknown while the input is read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

KINDS = ("t-pos-att", "t+pos-att", "t-pos+att", "t+pos+att", "lstm", "lstm+att")
TRANSFORMERS = KINDS[:4]
NUM_FEATURES = 36


@dataclass
class ModelConfig:
    kind: str = "t+pos+att"
    d_model: int = 100  # the paper's embedding size
    # The paper does not give the feed-forward width; 4 x d_model is Vaswani et al.'s ratio.
    ffn_dim: int = 400
    dropout: float = 0.2  # the paper's dropout
    num_features: int = NUM_FEATURES

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"invalid model kind {self.kind!r}; allowed: {', '.join(KINDS)}")
        for name in ("d_model", "ffn_dim", "num_features"):
            if getattr(self, name) < 1:
                raise ValueError(f"'{name}' must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"'dropout' must be in [0, 1), got {self.dropout}")

    @property
    def positional(self) -> bool:
        return self.kind.startswith("t+pos")

    @property
    def self_attention(self) -> bool:
        return self.kind.endswith("+att") and self.kind.startswith("t")

    @property
    def decoder_attention(self) -> bool:
        return self.kind != "lstm"


def sinusoidal_encoding(length: int, d_model: int) -> torch.Tensor:
    """PosEnc(pos, 2i) = sin(pos / 10000^(2i/d)), PosEnc(pos, 2i+1) = cos(...): [length, d]."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    rate = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)[:, : d_model // 2]
    return table


class FeatureModel(nn.Module):
    """One of the six models; `forward` returns (logits [batch], decoder attention
    [batch, n] or None for the basic LSTM)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.embed_input = nn.Linear(config.num_features, d)  # W_in
        self.embed_query = nn.Linear(config.num_features, d)  # W_q
        self.dropout = nn.Dropout(config.dropout)
        self.encoder: nn.Module | None = None
        self.lstm: nn.LSTM | None = None
        if config.self_attention:
            self.encoder = nn.TransformerEncoderLayer(
                d,
                nhead=1,
                dim_feedforward=config.ffn_dim,
                dropout=config.dropout,
                batch_first=True,
            )
        elif config.kind.startswith("lstm"):
            self.lstm = nn.LSTM(d, d, batch_first=True)
        self.hidden = nn.Linear(2 * d, d)  # W_o1: 200 -> 100
        self.output = nn.Linear(d, 1)  # W_o2: 100 -> 1

    def forward(
        self, vectors: torch.Tensor, query: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        n = vectors.shape[1]
        h = self.embed_input(vectors)  # [batch, n, d]
        if self.config.positional:
            h = h + sinusoidal_encoding(n, self.config.d_model).to(h)
        h = self.dropout(h)
        if self.encoder is not None:
            causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=h.device), 1)
            h = self.encoder(h, src_mask=causal)
        elif self.lstm is not None:
            h, _ = self.lstm(h)
        q = self.dropout(torch.relu(self.embed_query(query)))  # [batch, d]
        attention = None
        if self.config.decoder_attention:
            attention = torch.softmax(torch.einsum("bnd,bd->bn", h, q), dim=-1)  # alpha
            c = torch.einsum("bn,bnd->bd", attention, h)
        else:
            c = h[:, -1]  # the basic LSTM: the last output
        hidden = self.dropout(torch.relu(self.hidden(torch.cat([c, q], dim=-1))))
        return self.output(hidden).squeeze(-1), attention


def build_model(config: ModelConfig) -> FeatureModel:
    return FeatureModel(config)
