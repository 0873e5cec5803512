"""The reproduce pipeline: `attentionspan reproduce`'s stages, its config and the training
recipes of --quick. It runs the measurement layer and returns (and saves) data; the report
layer above it writes the documents, through the writers the command hands in.
"""
