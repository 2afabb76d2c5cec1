"""One redaction for every string that leaves the process: tags, params, artifacts, console
lines and error messages (MLflow's own "View run ... at:" links, which print the tracking URI
as given, are switched off where it carries a password: ``store.store_uri.quiet_run_links``).

It hides URL credentials (``https://user:PW@host`` keeps the user), query strings of URIs,
the values of ``KEY=VALUE`` / ``key: value`` pairs whose name looks like a secret
(``password=``, ``api_key:``), the value after a credential flag in a command line
(``--password PW``, ``--token=T``, ``--passwd PW``, ``--secret S``, ``--api-key K``), an HTTP
``Authorization:`` header's credentials (``-H "Authorization: Bearer T"``), the password of a
``user:PW`` pair after curl's ``-u`` / ``--user``, MySQL's and sshpass's ``-pPW``, OpenSSL's
``pass:PW`` and the fields named like secrets in a JSON value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

#: What a secret is replaced with.
REDACTED = "***"
#: A name that looks like a credential (an environment variable, a flag, a JSON field).
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSWD|PWD|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)

#: The last word of a flag or a pair's name that makes its value a credential
#: (``--api-key``, ``db_password=``; not ``--max-tokens`` or ``--token-count``).
_SECRET_WORD = (r"(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD|KEY|CREDENTIALS?|AUTH"
                r"|COOKIE|SESSION(?:_?ID)?)")
_URI = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
#: ``password=...``, ``api_key: ...`` inside a value (a libpq connection string, options).
_SECRET_PAIR = re.compile(
    rf"((?<!/)\b\w*{_SECRET_WORD}['\"]?\s*[=:]\s*['\"]?)([^\s,;&'\"}}]+)", re.I)
#: A command-line flag whose value is a credential (``--password PW``, ``--api-key K``).
_SECRET_FLAG = re.compile(rf"^--?[\w-]*{_SECRET_WORD}$", re.I)
#: The same flag inside free text, followed by its value (``... --token PW ...``).
_SECRET_FLAG_IN_TEXT = re.compile(
    rf"(?<![\w-])(--?[\w-]*{_SECRET_WORD})(\s+)(?!-)([^\s'\"]+)", re.I)
#: An HTTP header that carries credentials: everything after its colon is the secret
#: (``Authorization: Bearer T``, ``Proxy-Authorization: Basic B64``).
_AUTH_HEADER = re.compile(r"(\b(?:proxy-)?authorization\s*:\s*)([^'\"\r\n]+)", re.I)
#: A bearer token anywhere (``Bearer T``; "basic" is too common a word to follow).
_AUTH_SCHEME = re.compile(r"(\bbearer\s+)([A-Za-z0-9._~+/=-]{8,})", re.I)
#: OpenSSL's literal password source (``-passin pass:PW``, ``-passout pass:PW``).
_OPENSSL_PASS = re.compile(r"(?<![\w-])(pass:)(\S+)")
#: The flags whose value is ``user:password`` (curl's ``-u``, ``--user``, ``--proxy-user``).
_USER_FLAGS = ("-u", "--user", "-U", "--proxy-user")
_USER_FLAG_PAIR = re.compile(
    r"(?<![\w-])(-[uU]|--user|--proxy-user)(\s+|=)([^\s:'\"]+):([^\s'\"]+)")
_ATTACHED_USER = re.compile(r"^(-[uU])([^\s:]+):(.+)$")
#: Programs whose ``-pPW`` (attached) is a password: MySQL's and MariaDB's clients, sshpass.
_ATTACHED_P_PROGRAMS = re.compile(r"(?<![\w.-])(mysql\w*|mariadb\w*|sshpass)\b")
_ATTACHED_P = re.compile(r"(?<![\w-])-p(?=[^\s'\"])[^\s'\"]+")


#: A parameter name that holds a credential: its last word is one (``api_token``,
#: ``db_password``, ``access_key``; not ``sort_key`` or ``max_tokens``).
_SECRET_PARAM = re.compile(
    r"(?:^|[_.-])(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD|CREDENTIALS?|AUTH|COOKIE"
    r"|(?:API|ACCESS|SECRET|PRIVATE)[_-]?KEY|APIKEY)$", re.I)


def holds_secret(name: str, value: object) -> bool:
    """Whether a parameter ``name=value`` carries a credential: its name says so, or its
    value holds a secret form :func:`redact_text` would hide."""
    text = str(value)
    return bool(_SECRET_PARAM.search(name)) or redact_text(text) != text


def redact_uri(uri: str) -> str:
    """Hide credentials in a URI: ``user:secret@`` keeps the user, a bare ``token@`` is masked
    whole, and a query string (``?password=``, ``?token=``) is dropped."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    rest = rest.split("?", 1)[0]
    if "@" not in rest:
        return f"{scheme}://{rest}"
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:{REDACTED}@{host}" if ":" in creds else f"{scheme}://{REDACTED}@{host}"


def redact_text(text: str) -> str:
    """``text`` as it may leave the process: every URI redacted by :func:`redact_uri`, every
    secret-named pair and every credential flag's value masked."""
    text = _URI.sub(lambda found: redact_uri(found.group(0)), text)
    text = _AUTH_HEADER.sub(rf"\1{REDACTED}", text)
    text = _AUTH_SCHEME.sub(rf"\1{REDACTED}", text)
    text = _OPENSSL_PASS.sub(rf"\1{REDACTED}", text)
    text = _USER_FLAG_PAIR.sub(rf"\1\2\3:{REDACTED}", text)
    if _ATTACHED_P_PROGRAMS.search(text):
        text = _ATTACHED_P.sub(f"-p{REDACTED}", text)
    text = _SECRET_FLAG_IN_TEXT.sub(rf"\1\2{REDACTED}", text)
    return _SECRET_PAIR.sub(rf"\1{REDACTED}", text)


def redact_value(value: str) -> str:
    """A value without secrets; a JSON value (``TF_CONFIG``) loses its fields named like
    secrets and keeps its form."""
    try:
        data = json.loads(value)
    except ValueError:
        data = None
    if isinstance(data, dict | list):
        redacted = _redact_fields(data)
        return value if redacted == data else json.dumps(redacted)
    return redact_text(value)


def redact_command(argv: Sequence[str]) -> list[str]:
    """``argv`` as it may be recorded: URIs without credentials, ``password=...`` pairs and
    the value after a credential flag (``--password PW``, ``--token=T``) masked."""
    shown: list[str] = []
    attached_p = bool(argv) and bool(_ATTACHED_P_PROGRAMS.search(argv[0].rsplit("/", 1)[-1]))
    for arg in argv:
        flag, eq, _ = arg.partition("=")
        if shown and _SECRET_FLAG.match(shown[-1]) and not shown[-1].count("="):
            shown.append(REDACTED)
        elif eq and _SECRET_FLAG.match(flag):
            shown.append(f"{flag}={REDACTED}")
        elif shown and shown[-1] in _USER_FLAGS and ":" in arg:
            shown.append(f"{arg.split(':', 1)[0]}:{REDACTED}")
        elif _ATTACHED_USER.match(arg):
            shown.append(_ATTACHED_USER.sub(rf"\1\2:{REDACTED}", arg))
        elif attached_p and _ATTACHED_P.fullmatch(arg) and arg != "-p":
            shown.append(f"-p{REDACTED}")
        else:
            shown.append(redact_value(arg))
    return shown


def _redact_fields(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: REDACTED if SECRET_NAME.search(str(k)) else _redact_fields(v)
                for k, v in data.items()}
    if isinstance(data, list):
        return [_redact_fields(v) for v in data]
    return redact_text(data) if isinstance(data, str) else data
