"""How runs are kept: where they are tracked (:mod:`.tracking`, :mod:`.store_uri`), the
bounds on every wait for a store (:mod:`.database_bounds`, :mod:`.store_lock`), the journal
that holds what a run logs while its store is away (:mod:`.journal`,
:mod:`.journaled_store`), and who owns a run and who ends it (:mod:`.ownership`, with
:mod:`.lifecycle`, :mod:`.end_after_exit` and :mod:`.launcher_guard`)."""
