"""The measurement layer's attention questions, asked of the engine: scores (share on the
reference, rollout, statistics), heads (ranking), interventions, sweep, controls and the
verdict, analysis (Tables 1-2) and viewer_data. They return data and write no report.
Import the submodules; this package imports nothing heavy."""
