"""Every script in benchmarks/ runs to the end in its smallest form and prints its figures, so
a renamed or curated metric breaks a test, not a reviewer's reproduction. The figures
themselves are the benchmarks' to measure (docs/performance.md), never asserted here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, user_env

pytestmark = pytest.mark.slow

#: script -> its smallest settings (one round, the cheapest framework or runtime)
SMOKE = {
    "compare_scale.py": ["--runs", "20"],
    "harness_tax.py": ["--frameworks", "pytorch", "--rounds", "1", "--epochs", "1"],
    "latency_fidelity.py": ["--runtimes", "onnxruntime", "--rounds", "1"],
    "libraries.py": ["--frameworks", "pytorch", "--settings", "allocator=jemalloc",
                     "--rounds", "1"],
    # its serving pair is latency_fidelity's (benchmarks/pairs.py): run once, there
    "memory_fidelity.py": ["--rounds", "1", "--epochs", "1", "--frameworks", "pytorch",
                           "--runtimes"],
    "monitor_fidelity.py": ["--megabytes", "50", "--cpu-seconds", "0.3"],
    "monitor_overhead.py": ["--rounds", "1", "--scale", "0.05"],
    "openvino_peer.py": ["--model", "lenet5", "--rounds", "1", "--seconds", "1"],
    "server_capacity.py": ["--suts", "sleep", "--rounds", "1", "--min-queries", "100",
                           "--budget", "10"],
    "trial_overhead.py": ["--trials", "1", "--env-managers", "local"],
    "sequential_rule.py": ["--studies", "50"],
}
#: modules the scripts share, not run on their own
LIBRARIES = {"pairs.py"}


def test_every_benchmark_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert scripts - LIBRARIES == set(SMOKE), "give each new benchmark its smallest settings"


@pytest.mark.parametrize("script", SMOKE)
def test_a_benchmark_runs_and_prints_its_figures(script: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *SMOKE[script]],
                          cwd=tmp_path, env=user_env(tmp_path), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    figures = re.findall(r"\d+\.\d+", done.stdout)
    assert figures, done.stdout[-3000:]


@pytest.mark.parametrize("builder", ["torch_resnet50", "keras_resnet50"])
def test_the_bare_resnet50_has_torchvisions_parameter_count(builder: str,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The bare loops (training and serving) build what our presets build, so a pair compares
    like with like: 25,557,032 parameters, as torchvision's and our own ResNet-50."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks" / "bare"))
    import train_resnet50

    model = getattr(train_resnet50, builder)()
    if builder == "torch_resnet50":
        count = sum(p.numel() for p in model.parameters() if p.requires_grad)
    else:
        count = sum(int(w.shape.num_elements()) for w in model.trainable_weights)
    assert count == 25_557_032
