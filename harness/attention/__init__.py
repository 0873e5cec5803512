"""Attention analysis: capture and interventions (capture.py), reference positions
(positions.py), scores (scores.py). Import the submodules; this package imports nothing heavy."""
