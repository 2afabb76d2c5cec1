"""One redaction for every string that leaves the process: each secret form, in a value, a
command line and free text, and MLflow's own run links in any process that imports MLflow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mlflow_dlaas.redaction import redact_command, redact_text, redact_value

PW = "pw-7f3a9"


@pytest.mark.parametrize("text", [
    f"https://user:{PW}@host/x", f"--passwd {PW}", f"--password={PW}", f"--token {PW}",
    f"--secret {PW}", f"--api-key {PW}", f"-api_key {PW}", f"password={PW}",
    f"API_KEY: {PW}", f"ran: train.py --lr 0.1 --token {PW} --epochs 2",
    f"host=h password={PW} dbname=x", f"https://host/x?token={PW}",
    f"error at postgresql://bob:{PW}@db/optuna: refused",
    f'curl -H "Authorization: Bearer {PW}" https://h/x', f"Authorization: Basic {PW}",
    f"curl -u alice:{PW} https://h", f"curl --user=alice:{PW} https://h",
    f"mysql -h db -uroot -p{PW} optuna", f"openssl rsa -passin pass:{PW} -in k.pem",
    f"sshpass -p{PW} ssh host",
])
def test_every_secret_form_is_hidden_in_free_text(text: str) -> None:
    shown = redact_text(text)
    assert PW not in shown
    assert "***" in shown or "?" not in shown


@pytest.mark.parametrize("text", [
    "train.py --lr 0.1 --epochs 2", "sqlite:////tmp/mlflow.db", "--token-count 3 --tokens",
    "threads=2 batch_size=64", "keyboard interrupt", "basic settings of the basic block",
])
def test_text_without_secrets_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_a_command_line_loses_every_credential_but_keeps_its_shape() -> None:
    argv = ["cmd", f"https://user:{PW}@host", f"--passwd={PW}", "--token", PW,
            f"password={PW}", "--epochs", "2"]
    shown = redact_command(argv)
    assert shown == ["cmd", "https://user:***@host", "--passwd=***", "--token", "***",
                     "password=***", "--epochs", "2"]
    assert redact_value(f'{{"token": "{PW}", "n": 1}}') == '{"token": "***", "n": 1}'


@pytest.mark.parametrize(("argv", "shown"), [
    (["curl", "-H", f"Authorization: Bearer {PW}", "https://h"],
     ["curl", "-H", "Authorization: ***", "https://h"]),
    (["curl", "-u", f"alice:{PW}", "https://h"], ["curl", "-u", "alice:***", "https://h"]),
    (["curl", f"-ualice:{PW}"], ["curl", "-ualice:***"]),
    (["/usr/bin/mysql", "-uroot", f"-p{PW}", "db"], ["/usr/bin/mysql", "-uroot", "-p***", "db"]),
    (["openssl", "rsa", "-passin", f"pass:{PW}"], ["openssl", "rsa", "-passin", "pass:***"]),
])
def test_the_common_tools_credential_forms_are_hidden(argv: list[str], shown: list[str]
                                                      ) -> None:
    """curl's header and user, MySQL's attached password, OpenSSL's pass: source."""
    assert redact_command(argv) == shown


@pytest.mark.parametrize("argv", [
    ["python", "-u", "train.py"], ["mkdir", "-p", "out"], ["ssh", "-p22", "host"],
    ["tar", "-pxf", "a.tar"], ["python", "-c", "print('bypass:1')"],
])
def test_flags_that_only_look_like_credentials_are_kept(argv: list[str]) -> None:
    assert redact_command(argv) == argv


def test_mlflows_run_links_are_off_in_mlflow_run_of_our_projects_with_a_password() -> None:
    """MLflow prints "View run ... at: <tracking URI>/..." with the URI as given; in ``mlflow
    run`` of one of our projects, importing MLflow switches those lines off when the URI
    holds a password, and leaves them on otherwise. Anyone else's process is left as MLflow
    makes it."""
    from mlflow_dlaas.project_paths import projects_dir

    ours = ["/venv/bin/mlflow", "run", str(projects_dir() / "pytorch")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    seen = {}
    for argv in (ours, ["/venv/bin/python", "train.py"]):
        probe = (f"import os, sys; sys.argv = {argv!r}; import mlflow; "
                 "from mlflow.tracking.context.registry import resolve_tags; resolve_tags(); "
                 "print(os.environ.get('MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT'))")
        for uri in (f"http://alice:{PW}@127.0.0.1:9", "http://127.0.0.1:9"):
            out = subprocess.run([sys.executable, "-c", probe],
                                 env={**env, "MLFLOW_TRACKING_URI": uri}, capture_output=True,
                                 text=True, timeout=120, check=True)
            seen[argv[-1], "password" if PW in uri else "plain"] = out.stdout.strip()
    assert seen == {(ours[-1], "password"): "true", (ours[-1], "plain"): "None",
                    ("train.py", "password"): "None", ("train.py", "plain"): "None"}
