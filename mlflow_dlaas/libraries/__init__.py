"""Parallel-computing libraries as run settings: OpenMP runtime, memory allocator, oneDNN and
OpenMP thread policies (:mod:`.settings`), and what the measured process itself shows to be
loaded and in force (:mod:`.readback`)."""
