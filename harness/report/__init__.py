"""Reports: the figures (plots.py) and the stages of the reproduce pipeline."""
