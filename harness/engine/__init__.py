"""The engine: every model pass in one place.

    from harness.engine.scoring import Scorer             # batches, generation, teacher forcing
    from harness.engine.capture import AttentionPlan, capture_attention

inference (left-collated batches, generation and teacher forcing in one layout), scoring
(the per-instance loop, sharding and gathering over processes), capture (the one eager
attention function: recording and interventions), positions (reference rows as token
positions) and modes (how an intervention changes a row of weights). It imports only the
data layer; the measurement layer above it asks questions of it.
"""
