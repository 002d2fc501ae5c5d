"""Statistics below everything that uses them: survival analysis of censored times to capture
(:mod:`.survival`), IQM, bootstrap CIs and P(improvement) (:mod:`.bootstrap`), and paired
comparisons over seeds: the exact sign-flip test, Holm's correction, BCa and Wilson CIs and the
paired test's power (:mod:`.paired`)."""
