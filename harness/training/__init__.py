"""Training: the config and the loop (`train`), its losses (`loss`: the sliced language-model
loss; attention supervision reads through the engine's capture plan) and FSDP (`fsdp`)."""
