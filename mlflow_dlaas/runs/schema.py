"""The headline metrics a run carries: their keys, units and older names, in one place.

The figures a person compares sit in one ``Headline/`` section. MLflow 3.17's run page charts
metric sections in code-point order and un-prefixed metrics last, so an upper-case section
comes before every phase section (``eval/``, ``offline/``, ``system/`` ...). Memory is in
megabytes of 10**6 bytes, as in MLflow's own system metrics. Runs made before these names
keep their old keys; :func:`current_name` reads them under the new ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mlflow_dlaas.errors import ConfigError

SECTION = "Headline"
BYTES_PER_MEGABYTE = 1e6
_PER_BYTE = 1 / BYTES_PER_MEGABYTE  # one factor everywhere: the same bytes, the same MB

# Training (the train worker's final figures)
TEST_ACCURACY = f"{SECTION}/test_accuracy"
TRAIN_TIME = f"{SECTION}/train_time_seconds"
TIME_TO_ACCURACY = f"{SECTION}/time_to_accuracy_seconds"
TRAIN_THROUGHPUT = f"{SECTION}/train_samples_per_second"
# Every measured run: its measured phases (train, or the inference scenarios)
PEAK_MEMORY = f"{SECTION}/peak_memory_megabytes"
CPU_TIME = f"{SECTION}/cpu_seconds"
ENERGY = f"{SECTION}/energy_joules"
# Inference: one point of each scenario's results (the full results stay in its section)
SINGLE_STREAM_P50 = f"{SECTION}/single_stream_p50_ms"
SINGLE_STREAM_P99 = f"{SECTION}/single_stream_p99_ms"
OFFLINE_THROUGHPUT = f"{SECTION}/offline_samples_per_second"
MULTI_STREAM_P99 = f"{SECTION}/multi_stream_p99_ms"
SERVER_MAX_QPS = f"{SECTION}/server_max_qps_within_p99_bound"
SERVER_P99_AT_MAX_QPS = f"{SECTION}/server_p99_at_max_qps_ms"
ENSEMBLE_THROUGHPUT = f"{SECTION}/ensemble_samples_per_second"

#: Every headline key in the order a person reads it, with its label and unit (figures at
#: three significant digits).
LABELS: Mapping[str, tuple[str, str]] = {
    TEST_ACCURACY: ("test accuracy", ""),
    TRAIN_TIME: ("training time", "s"),
    TIME_TO_ACCURACY: ("time to target accuracy", "s"),
    TRAIN_THROUGHPUT: ("training throughput", "samples/s"),
    SINGLE_STREAM_P50: ("single-stream p50 (smallest batch)", "ms"),
    SINGLE_STREAM_P99: ("single-stream p99 (smallest batch)", "ms"),
    OFFLINE_THROUGHPUT: ("offline throughput (best batch)", "samples/s"),
    MULTI_STREAM_P99: ("multi-stream p99", "ms"),
    SERVER_MAX_QPS: ("server queries/s within the p99 bound", ""),
    SERVER_P99_AT_MAX_QPS: ("server p99 at that rate", "ms"),
    ENSEMBLE_THROUGHPUT: ("ensemble throughput", "samples/s"),
    PEAK_MEMORY: ("peak memory (measured phases)", "MB"),
    CPU_TIME: ("CPU time (measured phases)", "s"),
    ENERGY: ("energy (measured phases)", "J"),
}

#: A phase's peak memory, as logged per phase (``train/peak_proc_rss_megabytes``).
PHASE_PEAK_MEMORY = "peak_proc_rss_megabytes"

# Figures the report derives from the logged ones (report/derived.py computes them)
WHOLE_RUN_ENERGY = "whole_run_energy_joules"
ENERGY_PER_1000 = "energy_per_1000_predictions_joules"
# Training, per epoch (step = epoch)
TRAIN_LOSS = "train_loss"
TRAIN_ACCURACY = "train_accuracy"
EPOCH_TEST_ACCURACY = "test_accuracy"
EPOCH_TIME = "epoch_time_seconds"
EPOCH_THROUGHPUT = "train_samples_per_second"
CUMULATIVE_TRAIN_TIME = "cumulative_train_time_seconds"
# Training, at the end (beside the headline)
TOTAL_TRAIN_TIME = "total_train_time_seconds"
WARMUP_TIME = "warmup_time_seconds"
TEST_TIME = "test_time_seconds"
TEST_THROUGHPUT = "test_samples_per_second"
EPOCHS_COMPLETED = "epochs_completed"
STEPS_COMPLETED = "steps_completed"
TARGET_REACHED = "target_reached"
PARAMETER_COUNT = "parameter_count"
# How much of the machine a run used: the model's FLOPs (its spec's count, equal on every
# framework), the rate achieved in a measured phase, and that rate against the CPU's peak
FORWARD_FLOPS = "model_forward_flops_per_sample"
TRAINING_FLOPS = "model_training_flops_per_sample"
TRAIN_GFLOPS = "train_gflops_per_second"
TEST_GFLOPS = "test_gflops_per_second"
#: The peak a run is held against: the measured ceiling of its precision (mlflow_dlaas.ceilings)
PEAK_GFLOPS = "cpu_peak_gflops_per_second"
#: cores x clock x FP32 FLOPs per cycle, as /proc/cpuinfo and cpufreq say (below a VM's turbo)
NOMINAL_PEAK_GFLOPS = "cpu_nominal_fp32_peak_gflops_per_second"
#: The physical cores the run could use (its affinity, at most its intra-op threads), a param
CORES_IN_USE = "in_force_cores"
#: Training: the warm-up's steps and why it ended (settled, its step cap, its time budget)
WARMUP_STEPS_TAKEN = "in_force_warmup_steps"
WARMUP_ENDED = "in_force_warmup_ended"
#: The memory bandwidth measured with the ceilings (a triad, one thread)
MEMORY_BANDWIDTH = "cpu_memory_bandwidth_gb_per_second"
#: Inference: the bytes one sample moves at the least, beside the weights a batch shares:
#: every layer's output written and read once, in fp32 (the roofline's intensity)
ACTIVATION_BYTES = "model_activation_bytes_per_sample"
#: Inference: the weights' bytes in fp32, read once per batch
WEIGHT_BYTES = "model_weight_bytes"
#: Inference: the best offline batch size's
OFFLINE_GFLOPS = "offline_gflops_per_second"
#: Training: the train phase's; inference: the best offline batch size's; over PEAK_GFLOPS
FRACTION_OF_PEAK = "fraction_of_peak"
# Inference: a scenario's statistics, under ``{scenario}/`` and ``{scenario}/batch_{n}/``
LATENCY_P50 = "latency_p50_ms"
LATENCY_P90 = "latency_p90_ms"
LATENCY_P95 = "latency_p95_ms"
LATENCY_P99 = "latency_p99_ms"
LATENCY_MEAN = "latency_mean_ms"
LATENCY_STDEV = "latency_stdev_ms"
LATENCY_P99_EARLY_STOPPING = "latency_p99_early_stopping_ms"
QUERY_COUNT = "query_count"
MEASURED_TIME = "measured_seconds"  # not duration_seconds: the monitor's whole phase
THROUGHPUT = "throughput_samples_per_second"
SAMPLES_TOTAL = "samples_total"
LOAD_TIME = "load_time_seconds"
# The server scenario's offered and achieved rate; its load curve (step = point)
#: Multi-stream's samples per query: the scenario's property, not a batch size
MULTI_STREAM_SAMPLES = "multi_stream/samples_per_query"
SERVER_TARGET_QPS = "server/target_qps"
SERVER_ACHIEVED_QPS = "server/achieved_qps"
SERVER_MEAN_BATCH = "server/mean_batch_size"
SERVER_LOAD_P99 = "server_load/latency_p99_ms"
SERVER_LOAD_ACHIEVED_QPS = "server_load/achieved_qps"
SERVER_LOAD_QUERY_COUNT = "server_load/query_count"
#: 1 where LoadGen judged the test at that offered rate VALID, 0 where INVALID
SERVER_LOAD_VALID = "server_load/loadgen_valid"
#: The capacity search: how many rates it probed, how long it took, and the lowest rate
#: over the p99 bound above its answer (the bracket's upper end)
SERVER_SEARCH_PROBES = "server/rate_search_probes"
SERVER_SEARCH_SECONDS = "server/rate_search_seconds"
SERVER_SEARCH_LOWEST_INVALID_QPS = "server/rate_search_lowest_over_bound_qps"
# The ensemble scenario: its size, and each member's latencies (``ensemble/model{i}_...``)
ENSEMBLE_SIZE = "ensemble/size"
# The monitor's samples, each a series over the run and the statistic under ``{phase}/``;
# ``{i}`` is a device index (format it with ``.format(i=...)``). Their units, kinds and MLflow
# system-metric names are registered in ``mlflow_dlaas.monitor.metrics``.
PROC_CPU_PERCENT = "proc_cpu_percent"
PROC_CPU_SECONDS = "proc_cpu_seconds"
PROC_RSS = "proc_rss_bytes"
PROC_HWM_RSS = "proc_hwm_rss_bytes"
PROC_THREADS = "proc_threads"
PROC_PROCESSES = "proc_processes"
PROC_CTX_SWITCHES = "proc_ctx_switches"
PROC_IO_READ = "proc_io_read_bytes"
PROC_IO_WRITE = "proc_io_write_bytes"
HARNESS_CPU_SECONDS = "harness_cpu_seconds"
#: what the monitor spent itself over the whole run: its CPU seconds and its samples
MONITOR_CPU_SECONDS = "monitor_cpu_seconds"
MONITOR_SAMPLES = "monitor_samples"
SYS_CPU_PERCENT = "sys_cpu_percent"
SYS_CORE_CPU_PERCENT = "sys_cpu{i}_percent"
SYS_CPU_BUSY = "sys_cpu_busy_seconds"
SYS_CPU_STEAL = "sys_cpu_steal_seconds"
SYS_CPU_FREQ = "sys_cpu_freq_mhz"
SYS_MEMORY_USED = "sys_memory_used_bytes"
SYS_MEMORY_PERCENT = "sys_memory_percent"
SYS_MEMORY_PRESSURE = "sys_memory_pressure_percent"
SYS_MEMORY_AVAILABLE = "sys_memory_available_bytes"
GPU_UTILIZATION = "gpu{i}_utilization_percent"
GPU_MEMORY_USED = "gpu{i}_memory_used_bytes"
GPU_PROC_MEMORY_USED = "gpu{i}_proc_memory_used_bytes"
GPU_POWER = "gpu{i}_power_watts"
GPU_ENERGY = "gpu{i}_energy_joules"
GPU_TEMPERATURE = "gpu{i}_temperature_celsius"
GPU_SM_CLOCK = "gpu{i}_sm_clock_mhz"
CPU_PACKAGE_ENERGY = "cpu_package{i}_energy_joules"
#: The MLflow UI's system-metric names of the samples charted there (under ``system/``):
#: MLflow's own where it measures the same quantity, so the charts line up.
TIMELINE_PREFIX = "system/"
TIMELINE_PROC_CPU = "process_tree_cpu_percentage"
TIMELINE_PROC_RSS = "process_tree_rss_megabytes"
TIMELINE_PROC_THREADS = "process_tree_threads"
TIMELINE_SYS_CPU = "cpu_utilization_percentage"
TIMELINE_SYS_CPU_FREQ = "cpu_frequency_megahertz"
TIMELINE_SYS_MEMORY = "system_memory_usage_percentage"
TIMELINE_MEMORY_PRESSURE = "memory_pressure_percentage"
TIMELINE_GPU_UTILIZATION = "gpu_{i}_utilization_percentage"
TIMELINE_GPU_MEMORY = "gpu_{i}_memory_usage_megabytes"
TIMELINE_GPU_PROC_MEMORY = "gpu_{i}_process_tree_memory_megabytes"
TIMELINE_GPU_POWER = "gpu_{i}_power_usage_watts"
TIMELINE_GPU_ENERGY = "gpu_{i}_energy_joules"
TIMELINE_CPU_PACKAGE_ENERGY = "cpu_package_{i}_energy_joules"
# The validity figures of a judged phase (``validity/max_{OTHER_CORES}`` is logged)
OTHER_CORES = "other_processes_cpu_cores"
HARNESS_CORES = "harness_cpu_cores"
STEAL_FRACTION = "cpu_steal_fraction"
MEMORY_PRESSURE = "memory_pressure_percent"
# A phase's statistics, under ``{phase}/`` (the monitor's, as the run logs them); the phase
# ``run`` spans the whole run
RUN_PHASE = "run"
#: ``run/{MONITORED}{key}``: a counter's increase (and the duration) between the monitor's
#: first and last samples. A measured tree's CPU counts from its start, the machine's from
#: the monitor's first sample: the validity verdict holds them against each other only here.
MONITORED = "monitored_"
PHASE_DURATION = "duration_seconds"
#: A phase's peak memory in the monitor's summary (bytes; logged as PHASE_PEAK_MEMORY)
PHASE_PEAK_RSS = f"peak_{PROC_RSS}"
PHASE_CPU_TIME = PROC_CPU_SECONDS
PHASE_MEAN_CPU = "mean_proc_cpu_percent"
TRAIN_MEAN_CPU = f"train/{PHASE_MEAN_CPU}"
# The output check against the reference framework
EQUIVALENCE_MAX_ABS_ERROR = "equivalence/max_abs_error"
EQUIVALENCE_MAX_RELATIVE_ERROR = "equivalence/max_relative_error"
EQUIVALENCE_MEAN_RELATIVE_ERROR = "equivalence/mean_relative_error"
EQUIVALENCE_TOP1_AGREEMENT = "equivalence/top1_agreement"
# The whole run's process tree, as the monitor measured it; the worker as the kernel counted it
RUN_CPU_TIME = f"run/{PROC_CPU_SECONDS}"
WORKER_KERNEL_CPU_TIME = "worker/kernel_cpu_seconds"
# ``mlflow-dlaas monitor``: the command's wall time and the kernel's account of its tree
WALL_TIME = "wall_time_seconds"
KERNEL_CPU_TIME = "kernel_cpu_seconds"
KERNEL_MAX_RSS = "kernel_max_rss_bytes"
EXIT_CODE = "exit_code"


def scenario_key(scenario: str, statistic: str, batch: int | None = None) -> str:
    """``offline/latency_p99_ms``, or per batch size ``offline/batch_32/latency_p99_ms``."""
    return f"{scenario}/{statistic}" if batch is None else f"{scenario}/batch_{batch}/{statistic}"


P50_LATENCY = scenario_key("single_stream", LATENCY_P50)
P99_LATENCY = scenario_key("single_stream", LATENCY_P99)
INFERENCE_THROUGHPUT = scenario_key("offline", THROUGHPUT)


@dataclass(frozen=True)
class Alias:
    """A short name people type for a metric, with the direction that is better."""

    metric: str
    direction: str  # maximize | minimize
    meaning: str


#: The names objectives and bounds may use in study specs, ``compare`` and ``recommend``,
#: each with one meaning everywhere. Inference latencies and throughput are per batch size:
#: a study reads the last batch size logged (fix batch_sizes to one value, or name the flat
#: key, e.g. ``offline/batch_32/throughput_samples_per_second``); the report judges each
#: (configuration, batch size).
ALIASES: Mapping[str, Alias] = {
    "accuracy": Alias(TEST_ACCURACY, "maximize", "test accuracy after the last epoch"),
    "test_accuracy": Alias(TEST_ACCURACY, "maximize", "test accuracy after the last epoch"),
    "train_time": Alias(TRAIN_TIME, "minimize", "training time of the epochs"),
    "test_time": Alias(TEST_TIME, "minimize", "time to evaluate the test set"),
    "time_to_accuracy": Alias(TIME_TO_ACCURACY, "minimize",
                              "training time until the target accuracy"),
    "train_throughput": Alias(TRAIN_THROUGHPUT, "maximize", "training samples per second"),
    "peak_memory": Alias(PEAK_MEMORY, "minimize", "peak memory of the measured phases (MB)"),
    "peak_rss": Alias(PEAK_MEMORY, "minimize", "peak memory of the measured phases (MB)"),
    "cpu_seconds": Alias(RUN_CPU_TIME, "minimize", "CPU seconds of the whole process tree"),
    "wall_time": Alias(WALL_TIME, "minimize",
                       "wall-clock seconds of a command run by mlflow-dlaas (a project, monitor)"),
    "energy": Alias(ENERGY, "minimize", "energy of the measured phases (J)"),
    "whole_run_energy": Alias(WHOLE_RUN_ENERGY, "minimize",
                              "energy of the whole run, CPU packages and GPUs (J; report)"),
    "energy_per_1000_predictions": Alias(ENERGY_PER_1000, "minimize",
                                         "energy per 1,000 predictions (J; report)"),
    "p50_latency": Alias(P50_LATENCY, "minimize", "single-stream p50 latency (ms)"),
    "p99_latency": Alias(P99_LATENCY, "minimize", "single-stream p99 latency (ms)"),
    "inference_throughput": Alias(INFERENCE_THROUGHPUT, "maximize",
                                  "offline inference samples per second"),
    "load_time": Alias(LOAD_TIME, "minimize", "time to load the model (s)"),
    "top1_agreement": Alias(EQUIVALENCE_TOP1_AGREEMENT, "maximize",
                            "share of samples whose top-1 class matches the fp32 reference's"),
    "output_error": Alias(EQUIVALENCE_MAX_RELATIVE_ERROR, "minimize",
                          "largest output deviation from the fp32 reference, over max |ref|"),
}
#: Names that meant two figures in earlier versions: which name to write instead.
AMBIGUOUS: Mapping[str, str] = {
    "throughput": "train_throughput (training samples/s) or inference_throughput (offline "
                  "inference samples/s)",
}

# Tags (every ``dlaas.*`` tag a run carries)
#: the entry point that made the run: train, infer, study, report, monitor
ENTRY_TAG = "dlaas.entry"
#: study (a study's parent run), trial, report
ROLE_TAG = "dlaas.role"
#: the study a run belongs to
STUDY_TAG = "dlaas.study"
TRIAL_NUMBER_TAG = "dlaas.trial_number"
TRIAL_NAME_TAG = "dlaas.trial_name"
REPLICATE_TAG = "dlaas.replicate"
FRAMEWORK_TAG = "dlaas.framework"
#: The user's own MLflow Project a run measured (``entry`` is then ``project``).
PROJECT_TAG = "dlaas.project"
RUNTIME_TAG = "dlaas.runtime"
FRAMEWORK_VERSION_TAG = "dlaas.framework_version"
RUNTIME_VERSION_TAG = "dlaas.runtime_version"
#: valid | disturbed
VALIDITY_TAG = "dlaas.validity"
VALIDITY_REASON_TAG = "dlaas.validity_reason"
#: why a run ended other than FINISHED
REASON_TAG = "dlaas.failure_reason"
#: a run whose trial was retried (the retry measured it)
ORPHANED_TAG = "dlaas.orphaned"
#: Set on a trial's run that failed while the tracking server did not answer: not counted
#: against its configuration (its point is measured again)
OUTAGE_TAG = "dlaas.store_outage"
#: on a study's parent run: the trials this machine skipped unmeasured, and why
SKIPPED_TAG = "dlaas.skipped_here"
#: a trial run the study's pruner stopped (it ends KILLED)
PRUNED_TAG = "dlaas.pruned"
#: on a run ``decide`` measured: its session (the ``decide`` run's id), its round, and the
#: session's budget in rounds (the sequential rule's looks follow from it)
DECIDE_SESSION_TAG = "dlaas.decide_session"
DECIDE_ROUND_TAG = "dlaas.decide_round"
DECIDE_MAX_ROUNDS_TAG = "dlaas.decide_max_rounds"
#: its place in its round's order, and what drew the order (``2 of 3 (seed 0, round 4)``)
DECIDE_ORDER_TAG = "dlaas.decide_order"
BEST_TRIAL_TAG = "dlaas.best_trial"
BEST_RUN_IDS_TAG = "dlaas.best_run_ids"
CLOSEST_TRIAL_TAG = "dlaas.closest_trial"
REPORT_SCOPE_TAG = "dlaas.report_scope"
SCENARIO_RULES_TAG = "dlaas.scenario_rules"
LOADGEN_RESULT_TAG = "dlaas.loadgen_result"
EQUIVALENCE_RULE_TAG = "dlaas.equivalence_rule"
SERVER_RATE_SEARCH_TAG = "dlaas.server_rate_search"
WARNING_TAG = "dlaas.warning"
MODEL_FLAVOR_TAG = "dlaas.model_flavor"
#: Set where a pickled module was loaded because the user said they trust it
TRUSTED_PICKLE_TAG = "dlaas.trusted_pickle"
#: Where an inference run's model came from: one of :data:`MODEL_SOURCES`
MODEL_SOURCE_TAG = "dlaas.model_source"
#: fresh: an architecture with random weights; training_run: a training run's model
#: (``runs:/ID``); user_model: the user's file or MLflow model; text_model: built here
MODEL_SOURCES = ("fresh", "training_run", "user_model", "text_model")
#: Which peak the run was held against (measured ceiling, or nominal), or why none
PEAK_TAG = "dlaas.peak"
#: "not measured (synthetic data)" where the data's labels are random
ACCURACY_TAG = "dlaas.accuracy"
ACCURACY_NOT_MEASURED = "not measured (synthetic data)"
ONNX_TAG = "dlaas.onnx"
#: how the monitor sampled, in one line: its interval, failed probes, absent sources
MONITOR_TAG = "dlaas.monitor"
COMMAND_TAG = "dlaas.command"
EXIT_CODE_TAG = "dlaas.exit_code"
#: the parallel libraries mapped into the measured process
MAPPED_TAG = "dlaas.libraries.mapped"
#: the hardware a run measured on (the fingerprint's host_hash)
HOST_TAG = "dlaas.host"
#: the host class a fleet study measured on (``--host-class``, else from the fingerprint):
#: the report's hosts are these where runs carry one, never pooled
HOST_CLASS_TAG = "dlaas.host_class"
OWNER_HOST_TAG = "dlaas.owner_host"
OWNER_PID_TAG = "dlaas.owner_pid"
#: ``<start ticks>@<boot id>/<PID namespace>``
OWNER_START_TAG = "dlaas.owner_start"
#: per recommendation / claim of a report run; the fingerprint's (the CPU, the versions)
RECOMMENDATION_TAG_PREFIX = "dlaas.recommendation."
CLAIM_TAG_PREFIX = "dlaas.claim."
ENV_TAG_PREFIX = "dlaas.env."

#: Keys of runs made before the headline section: old key -> (new key, factor to its unit).
RENAMED: Mapping[str, tuple[str, float]] = {
    "final_test_accuracy": (TEST_ACCURACY, 1.0),
    "train_time_seconds": (TRAIN_TIME, 1.0),
    "time_to_accuracy_seconds": (TIME_TO_ACCURACY, 1.0),
    "train_samples_per_second_overall": (TRAIN_THROUGHPUT, 1.0),
    "measured_peak_rss_bytes": (PEAK_MEMORY, _PER_BYTE),
    "measured_cpu_seconds": (CPU_TIME, 1.0),
    "measured_energy_joules": (ENERGY, 1.0),
    "server/max_qps_within_p99_bound": (SERVER_MAX_QPS, 1.0),
    "server/latency_p99_at_max_qps_ms": (SERVER_P99_AT_MAX_QPS, 1.0),
}
_OLD_PHASE_PEAK = PHASE_PEAK_RSS


def megabytes(n_bytes: float) -> float:
    return n_bytes * _PER_BYTE


def current_name(key: str) -> tuple[str, float]:
    """``key`` as this version logs it, and the factor that turns its values into that
    metric's unit (``run/peak_proc_rss_bytes`` -> ``run/peak_proc_rss_megabytes``, 1e-6)."""
    if key in RENAMED:
        return RENAMED[key]
    phase, _, statistic = key.rpartition("/")
    if statistic == _OLD_PHASE_PEAK and phase:
        return f"{phase}/{PHASE_PEAK_MEMORY}", _PER_BYTE
    return key, 1.0


def current_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """A run's metrics under this version's names; where a run has both, the new key wins."""
    renamed = {}
    for key, value in metrics.items():
        name, factor = current_name(key)
        if name != key:
            renamed[name] = value * factor
    return {**renamed, **{k: v for k, v in metrics.items() if current_name(k)[0] == k}}


_PER_BATCH = re.compile(r"(?P<scenario>single_stream|offline)/batch_(?P<batch>\d+)/"
                        r"(?P<name>latency_p50_ms|latency_p99_ms|throughput_samples_per_second)")


def inference_headline(metrics: Mapping[str, float]) -> dict[str, float]:
    """The inference scenarios' headline points from their logged results: single-stream
    p50 and p99 at the smallest batch, the best offline throughput over batch sizes,
    multi-stream p99 and the ensemble's throughput (server's are logged as headline)."""
    per_batch: dict[tuple[str, str], dict[int, float]] = {}
    for key, value in metrics.items():
        found = _PER_BATCH.fullmatch(key)
        if found:
            per_batch.setdefault((found["scenario"], found["name"]), {})[
                int(found["batch"])] = value
    points = {}
    for name, key in (("latency_p50_ms", SINGLE_STREAM_P50), ("latency_p99_ms", SINGLE_STREAM_P99)):
        if ("single_stream", name) in per_batch:
            by_batch = per_batch["single_stream", name]
            points[key] = by_batch[min(by_batch)]
    if ("offline", "throughput_samples_per_second") in per_batch:
        points[OFFLINE_THROUGHPUT] = max(per_batch["offline", "throughput_samples_per_second"]
                                         .values())
    for key, source in ((MULTI_STREAM_P99, "multi_stream/latency_p99_ms"),
                        (ENSEMBLE_THROUGHPUT, "ensemble/throughput_samples_per_second")):
        if source in metrics:
            points[key] = metrics[source]
    return points


_BYTES = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


#: a metric key's ending -> the unit a person reads beside its value
UNITS = (("_samples_per_second", "samples/s"), ("gflops_per_second", "GFLOP/s"),
         ("_qps", "queries/s"), ("_megabytes", "MB"), ("_bytes", "bytes"),
         ("_seconds", "s"), ("_ms", "ms"), ("_joules", "J"), ("_watts", "W"),
         ("_percent", "%"), ("_mhz", "MHz"))


def unit_of(metric: str) -> str:
    """The unit of a metric key (``p99_latency_ms`` -> ``ms``); '' for counts and fractions
    (accuracy, fraction of peak)."""
    return next((unit for ending, unit in UNITS if metric.endswith(ending)), "")


def unit_factor(metric: str, unit: str, where: str) -> float:
    """What multiplies a value written with ``unit`` (``GiB``, ``ms``, ``%`` or none) into
    ``metric``'s own unit, named by its key (``_megabytes``, ``_ms``, ``_seconds``)."""
    unit = unit.lower()
    if metric.endswith("_megabytes") and unit in ("", *_BYTES):
        return _BYTES[unit] / BYTES_PER_MEGABYTE if unit else 1.0
    if metric.endswith("_bytes") and unit in ("", *_BYTES):
        return _BYTES[unit] if unit else 1.0
    if metric.endswith("_ms") and unit in ("", "ms", "s"):
        return 1000.0 if unit == "s" else 1.0
    if metric.endswith("_seconds") and unit in ("", "s", "ms"):
        return 0.001 if unit == "ms" else 1.0
    if unit == "%" and "accuracy" in metric:  # accuracy>=98% means a fraction of 0.98
        return 0.01
    if unit in ("", "%"):
        return 1.0
    raise ConfigError(f"{where}: unit {unit!r} does not fit metric {metric!r} (memory takes "
                      "B/KB/MB/GB/KiB/MiB/GiB, times take ms or s, accuracy takes %)")


#: MLflow keeps a run's name in 250 characters (its SQL stores refuse a longer one).
MAX_RUN_NAME_LENGTH = 250


def check_run_name(name: str, where: str) -> None:
    """ConfigError where ``name`` is longer than a run's name may be."""
    if len(name) > MAX_RUN_NAME_LENGTH:
        raise ConfigError(f"{where}: {len(name):,} characters; MLflow keeps "
                          f"{MAX_RUN_NAME_LENGTH} of a run's name: give a shorter name")
