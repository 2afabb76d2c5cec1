"""The user's own model: opened in its own framework, served by every runtime that can take it.

Every model here is written by the test through the framework's own API.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mlflow_dlaas.backends import InferenceOptions, get_runtime
from mlflow_dlaas.errors import ConfigError
from mlflow_dlaas.inference import equivalence
from mlflow_dlaas.inference.sources.inputs import synthetic_feed
from mlflow_dlaas.inference.sources.load import prepared_source
from mlflow_dlaas.inference.sources.user_files import open_user_model
from tests.conftest import skip_unless_installed


def write_two_input_onnx(path: Path) -> Path:
    """out = x @ W + y, x [batch, 4], y [batch, k] (k dynamic: the user must give it)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "y"],
                                                                         ["out"])],
        "two_inputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "k"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _serve(directory: Path, runtime: str) -> tuple[np.ndarray, np.ndarray]:
    source = prepared_source(directory)
    rt = get_runtime(runtime)
    rt.load()
    predict = rt.prepare(source, InferenceOptions())
    return predict(source.reference_inputs), source.reference_outputs


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_an_onnx_file_with_two_inputs_runs_as_onnx_computes_it(tmp_path: Path,
                                                                runtime: str) -> None:
    skip_unless_installed("onnx", runtime)
    model = write_two_input_onnx(tmp_path / "two.onnx")
    with pytest.raises(ConfigError, match=r"input 'y' has dynamic dimensions \[\?, \?\]; give "
                                          r"-P input_shape=y:N"):
        open_user_model(model, runtime=runtime, directory=tmp_path / "a")
    open_user_model(model, runtime=runtime, directory=tmp_path / "b",
            input_shape="y:3", seed=3)
    outputs, reference = _serve(tmp_path / "b", runtime)
    assert reference.shape == (4, 3)
    assert equivalence.compare(outputs, reference, precision="fp32", rtol=1e-4,
                               atol=1e-5).passed


def test_real_samples_come_from_an_npz_and_are_checked(tmp_path: Path) -> None:
    skip_unless_installed("onnx", "onnxruntime")
    model = write_two_input_onnx(tmp_path / "two.onnx")
    data = tmp_path / "samples.npz"
    np.savez(data, x=np.ones((2, 4)), y=np.full((2, 3), 5.0))
    open_user_model(model, runtime="onnxruntime", directory=tmp_path / "ok",
            input_shape="y:3", input_data=str(data))
    source = prepared_source(tmp_path / "ok")
    assert source.reference_inputs["y"].dtype == np.float32  # cast to the model's dtype
    assert np.all(source.reference_inputs["y"] == 5.0)
    np.savez(data, x=np.ones((2, 4)))
    with pytest.raises(ConfigError, match="has no array for input"):
        open_user_model(model, runtime="onnxruntime", directory=tmp_path / "bad",
                input_shape="y:3", input_data=str(data))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [("absent.onnx", None, "does not exist"),
     ("broken.onnx", b"not a protobuf at all", "cannot read broken.onnx as an ONNX model"),
     ("weights.bin", b"\0", "unknown model format 'weights.bin'"),
     ("model.pt", b"PK not a zip", "not a TorchScript or torch.save archive")])
def test_unusable_files_are_refused_in_one_line(tmp_path: Path, name: str,
                                                content: bytes | None, message: str) -> None:
    skip_unless_installed("onnx")
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as caught:
        open_user_model(path, runtime="onnxruntime", directory=tmp_path / "out")
    assert "\n" not in str(caught.value)


def test_a_runtime_that_cannot_take_the_model_says_why(tmp_path: Path) -> None:
    skip_unless_installed("onnx")
    model = write_two_input_onnx(tmp_path / "two.onnx")
    with pytest.raises(ConfigError, match="the pytorch runtime cannot load an onnx model; "
                                          "serve it with onnxruntime or openvino"):
        open_user_model(model, runtime="pytorch", directory=tmp_path / "out")


def test_torchscript_runs_natively_and_exported_to_onnx(tmp_path: Path) -> None:
    skip_unless_installed("torch", "onnx", "onnxruntime")
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 6 * 6, 5)).eval()
    path = tmp_path / "net.pt"
    torch.jit.trace(module, torch.rand(1, 1, 8, 8)).save(str(path))
    with pytest.raises(ConfigError, match="records no input shapes; give -P input_shape="):
        open_user_model(path, runtime="pytorch", directory=tmp_path / "none")
    for runtime in ("pytorch", "onnxruntime"):
        open_user_model(path, runtime=runtime, directory=tmp_path / runtime,
                input_shape="1x8x8")
        outputs, reference = _serve(tmp_path / runtime, runtime)
        assert outputs.shape == (4, 5)
        assert equivalence.compare(outputs, reference, precision="fp32", rtol=1e-3,
                                   atol=1e-5).passed, runtime
    assert (tmp_path / "onnxruntime" / "onnx" / "model.onnx").is_file()


@pytest.mark.slow
def test_torch_compile_takes_an_exported_program_and_refuses_torchscript(tmp_path: Path
                                                                          ) -> None:
    skip_unless_installed("torch")
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                                 torch.nn.Linear(8, 3)).eval()
    batch = torch.export.Dim("batch", min=1, max=1024)
    exported = torch.export.export(module, (torch.rand(2, 6),), dynamic_shapes=({0: batch},))
    torch.export.save(exported, str(tmp_path / "net.pt2"))
    torch.jit.trace(module, torch.rand(2, 6)).save(str(tmp_path / "net.pt"))
    runtime = get_runtime("pytorch")
    runtime.load()
    compiled = InferenceOptions(torch_compile=True)
    for name in ("net.pt2", "net.pt"):
        open_user_model(tmp_path / name, runtime="pytorch",
                        directory=tmp_path / name.replace(".", "-"), input_shape="6")
    source = prepared_source(tmp_path / "net-pt2")
    outputs = runtime.prepare(source, compiled)(source.reference_inputs)
    assert equivalence.compare(outputs, source.reference_outputs, precision="fp32", rtol=1e-4,
                               atol=1e-5).passed
    with pytest.raises(ConfigError, match="torch_compile=true cannot compile net.pt: "
                                          "torch.compile does not take TorchScript models"):
        runtime.prepare(prepared_source(tmp_path / "net-pt"), compiled)


def test_a_state_dict_is_not_a_model(tmp_path: Path) -> None:
    skip_unless_installed("torch")
    import torch

    path = tmp_path / "weights.pth"
    torch.save(torch.nn.Linear(2, 2).state_dict(), str(path))
    with pytest.raises(ConfigError, match="holds an OrderedDict, not a module"):
        open_user_model(path, runtime="pytorch", directory=tmp_path / "out",
                input_shape="2")


class _Payload:
    """What a hostile pickle carries: code run while it is unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("runtime", ["pytorch", "onnxruntime"])
def test_a_pickled_module_runs_no_code_unless_the_user_trusts_it(
        tmp_path: Path, runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``torch.save``'d file is refused before its pickle runs anything; with
    DLAAS_TRUST_PICKLED_MODELS=1 a real module loads."""
    skip_unless_installed("torch")
    import torch

    from mlflow_dlaas.backends.model_files import TRUST_PICKLES_ENV

    hostile, marker = tmp_path / "hostile.pth", tmp_path / "ran"
    torch.save({"weight": _Payload(marker)}, str(hostile))
    monkeypatch.delenv(TRUST_PICKLES_ENV, raising=False)
    with pytest.raises(ConfigError, match="hostile.pth is a pickled PyTorch module: loading it "
                                          "runs whatever code .* DLAAS_TRUST_PICKLED_MODELS=1"):
        open_user_model(hostile, runtime=runtime, directory=tmp_path / "out", input_shape="2")
    assert not marker.exists(), "the pickle's code ran"
    trusted = tmp_path / "linear.pth"
    torch.save(torch.nn.Linear(2, 2), str(trusted))
    monkeypatch.setenv(TRUST_PICKLES_ENV, "1")
    manifest = open_user_model(trusted, runtime=runtime, directory=tmp_path / "ok",
                               input_shape="2")
    assert manifest.user is not None and manifest.user.kind == "torch_pickle"


def test_a_keras_file_runs_on_tensorflow_and_on_onnx_where_a_converter_is(tmp_path: Path
                                                                          ) -> None:
    """Without tf2onnx an ONNX runtime says why in one line; with it, it serves the model."""
    skip_unless_installed("tensorflow")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(3)])
    path = tmp_path / "small.keras"
    model.save(str(path))
    open_user_model(path, runtime="tensorflow", directory=tmp_path / "tf")
    outputs, reference = _serve(tmp_path / "tf", "tensorflow")
    assert outputs.shape == (4, 3)
    assert equivalence.compare(outputs, reference, precision="fp32", rtol=1e-4,
                               atol=1e-5).passed
    if importlib.util.find_spec("tf2onnx") is None:
        with pytest.raises(ConfigError, match="needs tf2onnx"):
            open_user_model(path, runtime="openvino", directory=tmp_path / "ov")
        return
    skip_unless_installed("onnxruntime")  # with the converter: through ONNX, against TensorFlow
    open_user_model(path, runtime="onnxruntime", directory=tmp_path / "ort")
    outputs, reference = _serve(tmp_path / "ort", "onnxruntime")
    assert (tmp_path / "ort" / "onnx" / "model.onnx").is_file()
    assert equivalence.compare(outputs, reference, precision="fp32", rtol=1e-4,
                               atol=1e-5).passed


def test_synthetic_inputs_are_seeded_and_typed() -> None:
    from mlflow_dlaas.backends.served_model import InputSpec

    specs = [InputSpec("ids", (5,), "int64"), InputSpec("mask", (5,), "bool")]
    a, b = synthetic_feed(specs, 3, 1), synthetic_feed(specs, 3, 1)
    assert np.array_equal(a["ids"], b["ids"]) and a["ids"].dtype == np.int64
    assert a["mask"].dtype == np.bool_ and len(a[:2]) == 2


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_a_model_the_runtime_cannot_load_is_refused_in_one_line(tmp_path: Path,
                                                                 runtime: str) -> None:
    """A float64 bias on a float32 convolution passes ONNX's checker but no runtime."""
    skip_unless_installed("onnx", runtime)
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"])], "mixed_types",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1, 2, 2])],
        [numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w"),
         numpy_helper.from_array(np.ones((1,), np.float64), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "mixed.onnx"))
    open_user_model(tmp_path / "mixed.onnx", runtime=runtime, directory=tmp_path / "s")
    rt = get_runtime(runtime)
    rt.load()
    with pytest.raises(ConfigError, match=f"{runtime} cannot load mixed.onnx: .*(type|Type)"
                       ) as caught:
        rt.prepare(prepared_source(tmp_path / "s"), InferenceOptions())
    assert "\n" not in str(caught.value)


def test_a_model_larger_than_the_free_memory_is_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_installed("onnx")
    import psutil

    model = write_two_input_onnx(tmp_path / "two.onnx")

    class Tight:
        available = 100  # bytes

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tight())
    with pytest.raises(ConfigError, match=r"model two.onnx needs at least 0.0 GiB \(2 copies\) "
                                          r"but only 0.0 GiB of memory is available"):
        open_user_model(model, runtime="onnxruntime", directory=tmp_path / "out",
                input_shape="y:3", copies=2)


def test_mlflow_models_arrive_as_their_flavors_files(tracking: str, tmp_path: Path) -> None:
    """An ONNX-flavor model by runs:/<id>/<path>: its file, its signature's shapes; a Keras
    model: its .keras file and its input example as samples; a pyfunc-only model: refused."""
    skip_unless_installed("onnx", "tensorflow")
    import keras
    import mlflow
    import onnx

    from mlflow_dlaas.inference.sources.fetch import download_mlflow_model

    graph = onnx.load(str(write_two_input_onnx(tmp_path / "two.onnx")))
    example = {"x": np.ones((2, 4), np.float32), "y": np.zeros((2, 3), np.float32)}
    keras_model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])

    class Echo(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):  # noqa: ANN001, ANN201
            return model_input

    with mlflow.start_run() as run:
        mlflow.onnx.log_model(graph, name="onnx_model", input_example=example)
        mlflow.tensorflow.log_model(keras_model, name="keras_model", pip_requirements=["tf"],
                                    input_example=np.full((3, 5), 2.0, np.float32))
        mlflow.pyfunc.log_model(name="echo", python_model=Echo(), pip_requirements=["numpy"])
    uri = f"runs:/{run.info.run_id}"
    path, (shape, dtype, data) = download_mlflow_model(f"{uri}/onnx_model", tmp_path / "a")
    assert path.suffix == ".onnx" and shape == "x:4,y:3"  # from the example: no signature
    assert set(np.load(data).files) == {"x", "y"}
    path, (shape, dtype, data) = download_mlflow_model(f"{uri}/keras_model", tmp_path / "b")
    assert path.name == "model.keras" and shape == "5" and dtype == "float32"
    assert np.all(next(iter(np.load(data).values())) == 2.0)
    with pytest.raises(ConfigError, match="has flavor\\(s\\) python_function only; "
                                          "mlflow-dlaas serves the flavors keras, onnx, "
                                          "pytorch, tensorflow"):
        download_mlflow_model(f"{uri}/echo", tmp_path / "c")
    with pytest.raises(ConfigError, match="cannot download it"):
        download_mlflow_model(f"{uri}/nothing_here", tmp_path / "d")


def test_a_savedmodel_directory_runs_on_tensorflow_with_and_without_xla(tmp_path: Path) -> None:
    skip_unless_installed("tensorflow")
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    model.export(str(tmp_path / "saved"), verbose=False)
    open_user_model(tmp_path / "saved", runtime="tensorflow", directory=tmp_path / "s")
    source = prepared_source(tmp_path / "s")
    assert source.user is not None and source.user.inputs[0].shape == (5,)
    runtime = get_runtime("tensorflow")
    runtime.load()
    for xla in (False, True):
        outputs = runtime.prepare(source, InferenceOptions(jit_compile=xla))(
            source.reference_inputs)
        assert equivalence.compare(outputs, source.reference_outputs, precision="fp32",
                                   rtol=1e-4, atol=1e-5).passed, xla


def test_a_model_with_a_fixed_batch_runs_at_that_batch_only(tmp_path: Path) -> None:
    skip_unless_installed("onnx", "onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    from mlflow_dlaas.inference.config import InferConfig
    from mlflow_dlaas.workloads.infer_worker import _check_batching, in_fixed_batches

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "fixed.onnx"))
    open_user_model(tmp_path / "fixed.onnx", runtime="onnxruntime", directory=tmp_path / "s")
    source = prepared_source(tmp_path / "s")
    assert source.user is not None and source.user.fixed_batch == 2
    uri = str(tmp_path / "fixed.onnx")
    with pytest.raises(ConfigError, match="fixes its batch size at 2; give -P batch_sizes=2"):
        _check_batching(source, InferConfig("onnxruntime", model_uri=uri, batch_sizes=(1, 8)))
    with pytest.raises(ConfigError, match="the server scenario needs batch 1"):
        _check_batching(source, InferConfig("onnxruntime", model_uri=uri, batch_sizes=(2,)))
    _check_batching(source, InferConfig("onnxruntime", model_uri=uri, batch_sizes=(2,),
                                        scenarios=("single_stream", "multi_stream")))
    runtime = get_runtime("onnxruntime")
    runtime.load()
    predict = in_fixed_batches(runtime.prepare(source, InferenceOptions()), 2)
    query = synthetic_feed(source.user.inputs, 8, 5)  # one multi-stream query, 4 model calls
    assert np.array_equal(predict(query), np.maximum(query["x"], 0))


def test_an_input_declaring_a_billion_elements_is_refused_before_any_is_made(
        tmp_path: Path) -> None:
    """An ONNX input of 10^9 elements a sample allocated 29.8 GiB before failing."""
    skip_unless_installed("onnx")
    import resource

    model = write_two_input_onnx(tmp_path / "two.onnx")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError, match=r"input 'y' declares 1,000,000,000 elements a sample "
                                          r"\(1000000000\); \d+ samples need [\d.]+ GiB"):
        open_user_model(model, runtime="onnxruntime", directory=tmp_path / "out",
                input_shape="y:1000000000")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 512 * 1024, f"{grown_kib / 1024:.0f} MiB allocated before refusing"
