"""``mlflow-dlaas resend``: send what runs kept in their journals while their tracking server
was away, once it is back, in order, each write once."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from mlflow_dlaas.console_log import console
from mlflow_dlaas.errors import ConfigError, TrackingUnavailableError
from mlflow_dlaas.redaction import redact_text, redact_uri
from mlflow_dlaas.store.journal import RunJournal, journal_root, journals_in
from mlflow_dlaas.store.journaled_store import Courier, finally_refused
from mlflow_dlaas.store.store_uri import TRACKING_ENV, is_unreachable

log = console(__name__)


def resend(journal: RunJournal, tracking_uri: str) -> int:
    """Send what ``journal`` holds to ``tracking_uri``, in order, and remove it; how many
    writes it sent. Where the server does not answer, or refuses a write for a reason that
    may pass (credentials, a proxy), raises :class:`TrackingUnavailableError` and keeps the
    rest (what was sent stays noted as sent)."""
    courier = Courier(tracking_uri)
    pending = journal.pending()
    for op in pending:
        try:
            courier.send(journal, op)
        except Exception as e:
            if not finally_refused(e):
                why = "still does not answer" if is_unreachable(e) else \
                    f"refused it ({redact_text(str(e))[:300]})"
                raise TrackingUnavailableError(
                    f"the tracking server at {redact_uri(tracking_uri)} {why}; run "
                    f"{journal.run_id} keeps its journal in {journal.folder}; resend it when "
                    "the server takes it") from None
            log.info(f"mlflow-dlaas: the tracking server refused a held write of run "
                     f"{journal.run_id} ({redact_text(str(e))[:300]}); skipped")
        journal.mark_sent(op.seq)
    journal.remove_if_delivered()
    return len(pending)


def _without_hidden_credentials(uri: str) -> str:
    """``http://host:5000`` for ``http://user:***@host:5000``: the credentials then come
    from MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD / MLFLOW_TRACKING_TOKEN."""
    parts = urlsplit(uri)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def resend_journals(paths: list[Path]) -> None:
    """``mlflow-dlaas resend``: send every journal at ``paths`` (default: all of this
    machine's) whose process has ended, each to MLFLOW_TRACKING_URI where set, else to the
    server it was logged to."""
    for gone in (p for p in paths if not p.exists()):
        log.info(f"mlflow-dlaas resend: {gone} does not exist: nothing to send there (a journal "
                 "is removed once it is sent, so sending twice is harmless)")
    journals = journals_in(paths or [journal_root()])
    live = [j for j in journals if j.writer_alive()]
    for journal in live:
        log.info(f"mlflow-dlaas resend: run {journal.run_id} is still being logged by its "
                 f"process; it sends its journal itself ({journal.folder})")
    if not journals and all(p.exists() for p in paths):
        where = ", ".join(map(str, paths)) or str(journal_root())
        log.info(f"mlflow-dlaas resend: nothing to send in {where}")
    damaged = []
    for journal in (j for j in journals if j not in live):
        try:
            uri = os.environ.get(TRACKING_ENV) or \
                _without_hidden_credentials(journal.tracking_uri)
            sent = resend(journal, uri)
        except ConfigError as e:  # this journal only: the others still go
            log.info(f"mlflow-dlaas resend: {e}")
            damaged.append(journal)
            continue
        log.info(f"mlflow-dlaas resend: sent {sent} writes of run {journal.run_id} to "
                 f"{redact_uri(uri)}")
    if damaged:
        raise ConfigError(f"{len(damaged)} damaged journal(s) not sent (said above); the "
                          "others were")
