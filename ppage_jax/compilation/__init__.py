"""Compiling across processes and commands: the persistent compile cache (:mod:`.cache`),
the program store that keeps whole compiled programs beside it (:mod:`.programs`) and the
compile time of each program (:mod:`.times`)."""
