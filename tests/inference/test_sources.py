"""A served model's one road: the plan decided once, a training run looked up once, the
folder's manifest written and read by one class, and helper processes' errors typed."""

from __future__ import annotations

from pathlib import Path

import mlflow
import numpy as np
import pytest

from mlflow_dlaas.backends import get_runtime
from mlflow_dlaas.backends.feed import Feed
from mlflow_dlaas.backends.served_model import InputSpec, UserModel
from mlflow_dlaas.errors import (
    ConfigError,
    MissingDependencyError,
    WorkloadError,
    error_from_record,
    error_record,
)
from mlflow_dlaas.inference.config import InferConfig
from mlflow_dlaas.inference.sources.fresh import export_fresh
from mlflow_dlaas.inference.sources.manifest import (
    ONNX_DIR,
    SourceManifest,
    read_reference,
    write_reference,
)
from mlflow_dlaas.inference.sources.plan import (
    Fresh,
    TextModel,
    TrainingRun,
    UserFile,
    plan_source,
)
from mlflow_dlaas.measured_process.helper import run_helper
from mlflow_dlaas.runs.schema import FRAMEWORK_TAG
from tests.conftest import skip_unless_installed


def logged_training_run(tmp_path: Path) -> str:
    """A run as a PyTorch training run leaves it for serving: its params, its framework tag,
    and LeNet-5's ONNX export with the reference (built here, fresh)."""
    export_fresh("lenet5", "", 0, tmp_path / "export")
    inputs, outputs = read_reference(tmp_path / "export")
    np.save(tmp_path / "export" / ONNX_DIR / "reference_inputs.npy", inputs)
    np.save(tmp_path / "export" / ONNX_DIR / "reference_outputs.npy", outputs)
    with mlflow.start_run() as run:
        mlflow.log_params({"model": "lenet5", "input_shape": "1x28x28", "num_classes": 10})
        mlflow.set_tag(FRAMEWORK_TAG, "pytorch")
        mlflow.log_artifacts(str(tmp_path / "export" / ONNX_DIR), ONNX_DIR)
    return run.info.run_id


def test_the_road_is_decided_once_from_the_config(tracking: str, tmp_path: Path) -> None:
    ort, torch_rt = get_runtime("onnxruntime"), get_runtime("pytorch")
    assert plan_source(InferConfig("onnxruntime"), ort) == Fresh("lenet5", exported=True)
    assert plan_source(InferConfig("pytorch"), torch_rt) == Fresh("lenet5", exported=False)
    assert plan_source(InferConfig("pytorch", model="bert_base"), torch_rt) == TextModel(
        "bert_base")
    user = plan_source(InferConfig.from_params({"runtime": "onnxruntime",
                                                "model_uri": "/models/resnet.onnx"}), ort)
    assert isinstance(user, UserFile) and user.name == "resnet"
    assert user.uri.path == Path("/models/resnet.onnx")
    skip_unless_installed("torch", "onnx")
    run_id = logged_training_run(tmp_path)
    trained = plan_source(InferConfig.from_params({"runtime": "pytorch",
                                                   "model_uri": f"runs:/{run_id}"}), torch_rt)
    assert isinstance(trained, TrainingRun) and trained.name == "lenet5"
    assert trained.with_model and trained.run.framework == "pytorch"
    with pytest.raises(ConfigError, match=f"training run {'0' * 32} does not exist"):
        plan_source(InferConfig("onnxruntime", model_uri=f"runs:/{'0' * 32}"), ort)


@pytest.mark.slow
def test_a_training_run_is_looked_up_once_per_inference_run(
        tracking: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Naming the run, choosing the road and downloading the model ask the store for the
    training run once between them."""
    skip_unless_installed("torch", "onnx", "onnxruntime")
    from mlflow.tracking._tracking_service.client import TrackingServiceClient

    from mlflow_dlaas.workloads.infer import run_inference

    run_id = logged_training_run(tmp_path)
    asked: list[str] = []
    get_run = TrackingServiceClient.get_run

    def counting(self: TrackingServiceClient, wanted: str):  # noqa: ANN202
        asked.append(wanted)
        return get_run(self, wanted)

    monkeypatch.setattr(TrackingServiceClient, "get_run", counting)
    result = run_inference(InferConfig.from_params({
        "runtime": "onnxruntime", "model_uri": f"runs:/{run_id}", "batch_sizes": "1",
        "scenarios": "single_stream", "min_query_count": 20, "min_duration_s": 0.1}))
    assert asked.count(run_id) == 1, asked
    served = mlflow.MlflowClient().get_run(result.run_id)
    assert served.info.status == "FINISHED"
    assert served.info.run_name.startswith("onnxruntime-lenet5-")
    assert served.data.metrics["equivalence/max_abs_error"] < 1e-4


def test_the_manifest_reads_back_what_was_written(tmp_path: Path) -> None:
    user = UserModel("onnx", tmp_path / "m.onnx", tmp_path / "m.onnx",
                     (InputSpec("ids", (128,), "int64"), InputSpec("mask", (128,), "int64", 2)),
                     tmp_path / "data.npz")
    written = SourceManifest("user", "m", "onnx", user=user, forward_flops=10,
                             parameter_count=3)
    written.write(tmp_path)
    assert SourceManifest.read(tmp_path) == written
    feed = Feed({"ids": np.ones((2, 128), np.int64), "mask": np.zeros((2, 128), np.int64)})
    write_reference(tmp_path, feed, np.arange(4.0))
    inputs, outputs = read_reference(tmp_path)
    assert isinstance(inputs, Feed) and set(inputs.arrays) == {"ids", "mask"}
    assert outputs.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_errors_cross_processes_typed() -> None:
    """The class and the whole message survive (a multi-line message too), where scraping
    stderr's last line kept neither."""
    missing = MissingDependencyError("tf2onnx", "tensorflow", "Converting a Keras model")
    back = error_from_record(error_record(missing))
    assert type(back) is MissingDependencyError and str(back) == str(missing)
    several = error_from_record(error_record(ConfigError("first line\nsecond line")))
    assert type(several) is ConfigError and str(several) == "first line\nsecond line"
    assert type(error_from_record({"type": "KeyError", "message": "x"})) is WorkloadError


def test_a_helper_process_error_arrives_typed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^model file .*absent\.onnx does not exist$"):
        run_helper("mlflow_dlaas.inference.sources.user_files",
                   ["--model", str(tmp_path / "absent.onnx"), "--runtime", "onnxruntime",
                    "--out", str(tmp_path / "out")], "opening absent.onnx")
    with pytest.raises(WorkloadError, match=r"reading failed \(exit code 2\): (.|\n)*No such file"):
        run_helper("json.tool", [str(tmp_path / "absent.json")], "reading")
