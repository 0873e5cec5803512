"""The six models of the discrete-retrieval paper (its Section 4, Figure 2 and appendix).

    from harness.baselines.models import ModelConfig, build_model
    model = build_model(ModelConfig(kind="t-pos+att"))
    logits, attention = model(vectors, query)  # [batch], [batch, n] decoder attention

Inputs are the native form: `vectors` float [batch, n, 36] (1 = active feature), `query`
float [batch, 36]. Every model builds token representations h_1..h_n, reads them with the
embedded query, and answers through an MLP: ReLU((c || emb_q) W_o1) W_o2, then a sigmoid
(the loss takes the logit). Kinds:

    t-pos-att   h = Enc(E)             the encoder cell without its self-attention sublayer
    t+pos-att   h = Enc(E + PosEnc)    (sinusoidal, Vaswani et al.)
    t-pos+att   h = Enc+att(E)         one causal layer, one head
    t+pos+att   h = Enc+att(E + PosEnc)  the full Transformer
    lstm        h = LSTM(vectors); c = the last h, no decoder attention
    lstm+att    h = LSTM(vectors); c = decoder attention over h

E = sqrt(36) * vectors W_in, emb_q = ReLU(query W_q) (for the LSTMs, query W_q), and the
decoder attention is alpha_i = softmax_i(h_i . emb_q), c = sum_i alpha_i h_i. Enc is the
post-norm encoder cell of Vaswani et al.: x = LN(x + SelfAttention(x)); h = LN(x + FFN(x)),
with a causal mask so that token i sees tokens 1..i only (the query is unknown while the
input is read).

Where the paper's text leaves a choice open, the model follows the authors' released code
(sorodoc/DiscreteSeq, read to compare; this is our own implementation), because that code
produced the paper's Table 2:

- "-Att" removes only the self-attention sublayer; the layer norms and the feed-forward
  sublayer stay (the first version of this module skipped the whole cell, a different
  model);
- the input embedding is scaled by sqrt(36), and W_in starts uniform in +-0.1, so the
  features are not drowned by the positional encoding (unit scale);
- the feed-forward width equals d_model (100);
- dropout (0.2) sits where the code has it: after the positional encoding (so only the
  "+Pos" models drop input embeddings), on the self-attention weights, and in the encoder's
  two residual branches and its feed-forward; none on the query or the output MLP;
- the LSTMs read the raw 36-dimensional vectors (the code defines an input embedding but
  never uses it), embed the query without a ReLU, and have no dropout (a one-layer
  nn.LSTM ignores it), with W_in and W_q starting uniform in +-0.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

KINDS = ("t-pos-att", "t+pos-att", "t-pos+att", "t+pos+att", "lstm", "lstm+att")
TRANSFORMERS = KINDS[:4]
NUM_FEATURES = 36
INIT_RANGE = 0.1  # the authors' uniform range for the embeddings they initialise


@dataclass
class ModelConfig:
    kind: str = "t+pos+att"
    d_model: int = 100  # the paper's embedding size
    ffn_dim: int = 100  # the authors' code: the feed-forward width is the hidden size
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
    def transformer(self) -> bool:
        return self.kind in TRANSFORMERS

    @property
    def positional(self) -> bool:
        return self.kind.startswith("t+pos")

    @property
    def self_attention(self) -> bool:
        return self.transformer and self.kind.endswith("+att")

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


class EncoderCell(nn.Module):
    """One post-norm encoder layer with one head; `self_attention=False` keeps everything
    but the attention sublayer (the paper's "-Att")."""

    def __init__(self, d_model: int, ffn_dim: int, dropout: float, self_attention: bool):
        super().__init__()
        self.attention = (
            nn.MultiheadAttention(d_model, 1, dropout=dropout, batch_first=True)
            if self_attention
            else None
        )
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = nn.Sequential(
            nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn_dim, d_model)
        )
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.attention is not None:
            n = x.shape[1]
            causal = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), 1)
            attended, _ = self.attention(x, x, x, attn_mask=causal, need_weights=False)
            x = x + self.dropout1(attended)
        x = self.norm1(x)
        return self.norm2(x + self.dropout2(self.feed_forward(x)))


class FeatureModel(nn.Module):
    """One of the six models; `forward` returns (logits [batch], decoder attention
    [batch, n] or None for the basic LSTM)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        d = config.d_model
        self.embed_query = nn.Linear(config.num_features, d)  # W_q
        self.encoder: EncoderCell | None = None
        self.lstm: nn.LSTM | None = None
        if config.transformer:
            self.embed_input = nn.Linear(config.num_features, d)  # W_in
            nn.init.uniform_(self.embed_input.weight, -INIT_RANGE, INIT_RANGE)
            self.input_dropout = nn.Dropout(config.dropout)
            self.encoder = EncoderCell(d, config.ffn_dim, config.dropout, config.self_attention)
        else:
            self.lstm = nn.LSTM(config.num_features, d, batch_first=True)
            nn.init.uniform_(self.embed_query.weight, -INIT_RANGE, INIT_RANGE)
        self.hidden = nn.Linear(2 * d, d)  # W_o1: 200 -> 100
        self.output = nn.Linear(d, 1)  # W_o2: 100 -> 1

    def encode(self, vectors: torch.Tensor) -> torch.Tensor:
        """Token representations h [batch, n, d]."""
        if self.lstm is not None:
            return self.lstm(vectors)[0]
        h = self.embed_input(vectors) * math.sqrt(self.config.num_features)
        if self.config.positional:
            n = vectors.shape[1]
            h = self.input_dropout(h + sinusoidal_encoding(n, self.config.d_model).to(h))
        return self.encoder(h)

    def forward(
        self, vectors: torch.Tensor, query: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = self.encode(vectors)
        q = self.embed_query(query)
        if self.config.transformer:
            q = torch.relu(q)
        attention = None
        if self.config.decoder_attention:
            attention = torch.softmax(torch.einsum("bnd,bd->bn", h, q), dim=-1)  # alpha
            c = torch.einsum("bn,bnd->bd", attention, h)
        else:
            c = h[:, -1]  # the basic LSTM: the last output
        hidden = torch.relu(self.hidden(torch.cat([c, q], dim=-1)))
        return self.output(hidden).squeeze(-1), attention


def build_model(config: ModelConfig) -> FeatureModel:
    return FeatureModel(config)
