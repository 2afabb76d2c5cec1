"""What a store write cut in half by a stop signal leaves behind, let go of before the run
that was writing is ended."""

from __future__ import annotations

import gc
import traceback


def release_interrupted_statements(error: BaseException) -> None:
    """Let go of what the frames of ``error`` (and the errors it chains) still hold.

    A stop signal that lands inside a SQLite write leaves the write's cursor in those frames;
    while it lives, its connection cannot close and keeps the database locked, so the run
    could not be ended ("database is locked"). Clearing the finished frames frees it.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__
    gc.collect()
