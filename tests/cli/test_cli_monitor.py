"""`mlflow-dlaas monitor -- CMD` as a user runs it: real subprocesses, metrics read back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from mlflow_dlaas.runs.schema import REASON_TAG
from tests.conftest import runs_of

CHILD = (
    "import subprocess, sys, time\n"
    "block = bytearray(120 * 2**20)\n"
    "kid = subprocess.Popen([sys.executable, '-c', "
    "'import time\\nt=time.process_time()\\nwhile time.process_time()-t<0.5: pass'])\n"
    "kid.wait()\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.5: pass\n"
    "sys.exit(int(sys.argv[1]))\n"
)


def _monitor(cli: str, experiment: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [cli, "monitor", "--interval", "0.05", "--experiment", experiment, *args],
        capture_output=True, text=True, timeout=120, **kw,
    )


@pytest.mark.parametrize("code", [0, 3])
def test_command_is_measured_and_its_exit_code_passed_on(
    cli_path: str, tracking: str, code: int
) -> None:
    out = _monitor(cli_path, tracking, "--run-name", "child", "--",
                   sys.executable, "-c", CHILD, str(code))
    assert out.returncode == code, out.stderr
    (run,) = runs_of(tracking)
    assert run.info.status == ("FINISHED" if code == 0 else "FAILED")
    assert run.info.run_name == "child"
    m = run.data.metrics
    assert m["exit_code"] == code
    assert m["run/peak_proc_rss_megabytes"] >= 120 * 2**20 / 1e6
    summary = mlflow.MlflowClient().download_artifacts(run.info.run_id, "monitor/summary.json")
    with open(summary) as f:  # every statistic is in the artifact, a few are metrics
        assert json.load(f)["summary"]["run/peak_proc_processes"] == 2
    # our sampled CPU seconds agree with the kernel's accounting of the reaped tree
    assert m["run/proc_cpu_seconds"] == pytest.approx(m["kernel_cpu_seconds"], rel=0.05)
    assert m["wall_time_seconds"] >= 1.0
    assert run.data.tags["dlaas.exit_code"] == str(code)
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id,
                                                       "system/process_tree_cpu_percentage")
    assert len(history) >= 10


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ([], "no command given", 2),
        (["--", "definitely-not-a-command-xyz"], "command not found", 127),
        (["--interval", "0", "--", "true"], "interval must be > 0", 2),
        (["--interval", "-1", "--", "true"], "interval must be > 0", 2),
        (["--interval", "inf", "--", "true"], "above the supported 3600 s", 2),
        (["--interval", "nan", "--", "true"], "interval must be > 0", 2),
        (["--threads", "99999999999999999999", "--", "true"],
         "intra_op_threads 99999999999999999999 is more than the 4,096 threads", 2),
        (["--openmp-runtime", "", "--", "true"], "--openmp-runtime is empty", 2),
        (["--run-name", "r" * 10_000, "--", "true"], "--run-name: 10,000 characters; "
                                                      "MLflow keeps 250", 2),
    ],
)
def test_bad_input_is_refused_before_any_run(
    cli_path: str, tracking: str, args: list[str], message: str, code: int
) -> None:
    out = subprocess.run([cli_path, "monitor", "--experiment", tracking, *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == code
    assert message in out.stderr
    assert runs_of(tracking) == []


def test_interrupting_the_monitor_stops_the_command_and_ends_the_run(
    cli_path: str, tracking: str
) -> None:
    proc = subprocess.Popen(
        [cli_path, "monitor", "--interval", "0.05", "--experiment", tracking, "--",
         sys.executable, "-c", "import time; time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not runs_of(tracking):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert run.data.metrics["exit_code"] == 128 + signal.SIGTERM


def test_the_command_logs_into_the_same_run(cli_path: str, tracking: str) -> None:
    code = "import mlflow; mlflow.log_metric('inner_metric', 7)"
    env = dict(os.environ)
    out = _monitor(cli_path, tracking, "--", sys.executable, "-c", code, env=env)
    assert out.returncode == 0, out.stderr
    (run,) = runs_of(tracking)
    assert run.data.metrics["inner_metric"] == 7


def test_a_file_that_cannot_be_executed_exits_126_before_any_run(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    for target, says in ((script, "it is not executable"), (tmp_path, "it is a directory")):
        out = subprocess.run([cli_path, "monitor", "--experiment", tracking, "--", str(target)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 126, out.stderr
        assert out.stderr.strip().splitlines() == [
            f"mlflow-dlaas: error: cannot execute {str(target)!r}: {says}; give a program or "
            "script with execute permission (chmod +x), or run it with its interpreter "
            f"(e.g. -- python {target})"]
        assert runs_of(tracking) == []


def test_a_script_with_a_missing_interpreter_exits_126_and_fails_its_run(
    cli_path: str, tracking: str, tmp_path: Path
) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/nonexistent/interpreter\necho hi\n")
    script.chmod(0o755)
    out = subprocess.run([cli_path, "monitor", "--experiment", tracking, "--", str(script)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 126, out.stderr
    assert "Traceback" not in out.stderr
    assert f"cannot execute {str(script)!r}: No such file or directory" in out.stderr
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert "cannot execute" in run.data.tags[REASON_TAG]


def test_secrets_in_the_command_reach_no_tag_and_no_stream(cli_path: str, tracking: str) -> None:
    secret = "SECRET-mon-77"
    out = _monitor(cli_path, tracking, "--", sys.executable, "-c", "import time; time.sleep(1)",
                   f"postgresql://u:{secret}@h/db", "--password", secret, f"--token={secret}",
                   f"--passwd={secret}", f"host=h password={secret}")
    assert out.returncode == 0, out.stderr
    (run,) = runs_of(tracking)
    assert secret not in out.stdout + out.stderr
    assert secret not in json.dumps([run.data.tags, run.data.params])
    assert "postgresql://u:***@h/db --password *** --token=***" in run.data.tags["dlaas.command"]
    client = mlflow.MlflowClient()
    pending = list(client.list_artifacts(run.info.run_id))
    texts = []
    while pending:  # every artifact, libraries/readback.json among them
        item = pending.pop()
        if item.is_dir:
            pending += client.list_artifacts(run.info.run_id, item.path)
        else:
            texts.append((item.path, Path(client.download_artifacts(
                run.info.run_id, item.path)).read_text(errors="replace")))
    assert "libraries/readback.json" in dict(texts)
    assert [path for path, text in texts if secret in text] == []


def test_a_command_killed_by_a_signal_fails_its_run_with_the_reason(cli_path: str,
                                                                     tracking: str) -> None:
    out = _monitor(cli_path, tracking, "--", sys.executable, "-c",
                   "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert out.returncode == 128 + signal.SIGKILL
    (run,) = runs_of(tracking)
    assert run.info.status == "FAILED"
    assert run.data.tags[REASON_TAG] == "the command was killed by SIGKILL"


def test_settings_are_applied_around_the_command_and_read_back(cli_path: str,
                                                               tracking: str) -> None:
    """``--threads`` and ``--allocator`` as a study applies them to a project: the command
    sees the variables, jemalloc is mapped into it, its phases are reported apart."""
    code = ("import os, time, mlflow, mlflow_dlaas\n"
            "with mlflow_dlaas.phase('work'):\n"
            "    time.sleep(0.3)\n"
            "mlflow.start_run(); mlflow.log_param('seen', os.environ['OMP_NUM_THREADS'])\n"
            "mlflow.end_run()\n")
    done = _monitor(cli_path, tracking, "--threads", "2", "--allocator", "jemalloc",
                    "--", sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr
    (run,) = runs_of(tracking)
    assert run.data.params["seen"] == "2"
    assert run.data.params["intra_op_threads"] == "2"
    assert "libjemalloc" in run.data.tags["dlaas.libraries.mapped"]
    assert run.data.metrics["work/duration_seconds"] >= 0.25
    assert run.data.tags["dlaas.validity"] in ("valid", "disturbed")


def test_an_unknown_setting_is_refused_before_any_run(cli_path: str, tracking: str) -> None:
    done = _monitor(cli_path, tracking, "--set", "thread=2", "--", "true")
    assert done.returncode == 2
    assert "--set thread: not a setting mlflow-dlaas applies" in done.stderr
    assert not runs_of(tracking)


def test_a_daemon_the_command_leaves_behind_ends_with_it(cli_path: str, tracking: str) -> None:
    """A double-forked daemon (``setsid ... &``) outlives its shell; it is stopped when the
    command ends, and the console says so."""
    import random

    import psutil

    seconds = str(random.randint(400, 900))
    out = _monitor(cli_path, tracking, "--", "sh", "-c", f"setsid sleep {seconds} & sleep 1")
    assert out.returncode == 0, out.stderr
    assert f"stopped 1 process(es) the command left running: sleep {seconds}" in out.stderr
    assert not [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] == ["sleep", seconds]]


def test_a_monitor_run_is_named_after_its_command(cli_path: str, tracking: str,
                                                  tmp_path) -> None:
    """MLflow's random names (peaceful-crane-552) said nothing of what was measured."""
    script = tmp_path / "fit.py"
    script.write_text("print('fitted')\n")
    out = _monitor(cli_path, tracking, "--", "python", str(script), "--lr", "0.1")
    assert out.returncode == 0, out.stderr
    (run,) = runs_of(tracking)
    assert run.info.run_name == "monitor-python-fit.py"
