"""Statistics below everything that uses them: survival analysis of censored times to capture
(:mod:`.survival`) and IQM, bootstrap CIs and P(improvement) (:mod:`.bootstrap`)."""
