"""The baselines of the discrete-retrieval paper (Sorodoc, Boleda and Baroni 2021): four
Transformer variants and two LSTMs on the native form of tasks T1-T7 (36-dimensional binary
vectors), trained with the paper's recipe.

    attentionspan baselines --task T6 --length 10 --seeds 5 --output runs/baselines/t6.json

models.py: the six models; data.py: instances -> tensors and reference vectors;
train.py: one (task, length, model, seed) run; table.py: result files beside the paper's
Table 2; authors_data.py: the authors' released files read into the same tensors
(`--authors-test` scores on their test file, `--authors-data` trains on their folder). The
command is harness/commands/baselines.py.
"""
