"""Everything that writes Markdown, PNG, HTML or JSON for people: report.md (report_md,
findings), the figures (plots), the viewer, the eval and attention reports, and
docs/results.md's generated blocks (results_doc, and scratch_doc for the scratch reversal
model's figures in README.md and the docs). It reads the measurement layer's and the
pipeline's data; nothing below imports it."""
