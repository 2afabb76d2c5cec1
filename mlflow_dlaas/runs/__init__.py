"""What a run is and how it is kept: the run schema (every metric key, tag and alias), the
tracking store, run ownership and lifecycle, the journal that holds results while the store
is away, and the curation of what a run logs."""
