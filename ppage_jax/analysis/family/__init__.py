"""The declared analysis of a sweep: the primary endpoint, the family of paired comparisons and
the prediction, written in the sweep file before it runs, and their test on its files.

Modules: ``endpoints`` (the task metrics and the normalised score, named once), ``declare``
(``sweep.analysis`` read and checked), ``paired`` (the family tested: paired differences, exact
sign-flip p, Holm, BCa and Wilson CIs), ``report`` (report.md's sections).
"""
