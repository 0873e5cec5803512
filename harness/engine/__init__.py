"""The engine: every model pass in one place.

    from harness.engine.scoring import Scorer             # batches, generation, teacher forcing
    from harness.engine.capture import AttentionPlan, capture_attention

inference (left-collated batches, generation and teacher forcing in one layout, the
training forward), prefill (a batch's prompt cache, shared by its settings), scoring (the
per-instance loop, sharding and gathering over processes), capture (the one eager attention
function: recording and interventions), positions (reference rows as token positions) and
modes (how an intervention changes a row of weights). It imports only the foundation; the
layers above ask questions of it and never call a model themselves
(tests/harness/test_model_calls.py).
"""
