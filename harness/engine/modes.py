"""The intervention modes, one tuple for capture (the engine) and the sweep's settings (the
measurement layer), in a module that imports nothing: `attentionspan reproduce --help` reads
them without loading torch.

    standard     add C to the post-softmax weights at the cells of the selected heads
    conditional  the same, only where the weight already exceeds a threshold
    knockout     set those weights to 0
    restore      set each selected head's mass on the cells to its ID level, renormalised
"""

INTERVENTION_MODES = ("standard", "conditional", "knockout", "restore")
