"""The room for judgement: every verdict rule, its thresholds and its words, in one folder.

    vocabulary         each verdict word, what it means, what it rules out; the thresholds
                       (MOSTLY, POINTER_EXCESS, MIN_POINTER_ROWS, ID_TOLERANCE, ON_REFERENCE,
                       ID_WORKS, NULL_MARGIN)
    exists             the calibrated verdict's first gate: a lookup exists (the model works
                       in distribution, a lookup head beats its null) before it is judged
    calibrated         the headline verdict: N and the dose chosen on OOD validation from the
                       dose ladder, the kind of failure from where the errors look, the
                       ladder's controls read at the chosen dose on OOD test (its numbers
                       include what each ladder control of the registry declares)
    repair_or_pointer  repair or pointer at the grid's chosen setting (the sweep's controls)
    supervision        the supervision study's verdict, from its numbers over seeds
    stability          how stable a verdict is: the share of bootstrap resamples of the
                       instances giving its word (under STABLE: unstable between the words
                       taken) and its flip margin, against any word function

A rule takes measured values (curves, gains, diagnoses: plain data) and returns
{"verdict", "reasons" or "reason", "numbers"}; it measures nothing and writes nothing.
Reports import the words and thresholds from `vocabulary`, never restate them. What counts
as evidence at one dose (a shifted push `followed`, and its thresholds) sits below this
folder and the controls (`harness.attention.evidence`): the pointer control names it in the
numbers it hands the calibrated verdict, so a control never imports a verdict. A new rule
is one module here speaking `vocabulary`'s words (a new word is one `Verdict` line there),
and a test under tests/harness/attention/verdicts/ on inputs whose verdict is known.
Nothing here is imported at package import: each module is imported by name.
"""
