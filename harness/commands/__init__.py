"""One module per `attentionspan` command of the harness (train, eval, models, attention, heads,
reproduce, baselines): its parser, built from the command's config dataclass and the shared
options of `harness.foundation.options`, and the glue that runs it. The measurement they call
returns
data; `harness.report` writes it."""
