"""Compiling across processes and commands: the persistent compile cache (:mod:`.cache`)
and the compile time of each program (:mod:`.times`)."""
