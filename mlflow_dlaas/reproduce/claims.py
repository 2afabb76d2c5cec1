"""The eight findings of the two papers, each with the study that re-measures it.

A claim's study specs are ``examples/reproduce/<stem>-<plan>.yaml`` (``plan``: quick or
full), runnable alone with ``mlflow-dlaas study``. Claims may share a study: claim 4 is
judged on claim 2's runs, claim 8 on claim 6's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlflow_dlaas.errors import ConfigError

TRAINING_PAPER = ("Wu, Liu, Pu et al., A Comparative Measurement Study of Deep Learning as a "
                  "Service Framework, arXiv 1810.12210")
INFERENCE_PAPER = "Pochelu, Deep Learning Inference Frameworks Benchmark, arXiv 2210.04323"
PLANS = ("quick", "full")


@dataclass(frozen=True)
class Claim:
    """One finding: where it comes from, how it is re-measured and how it is decided."""

    number: int
    paper: str
    section: str  # where in the paper the finding is stated
    text: str  # the finding, paraphrased
    study: str  # the spec's stem under examples/reproduce/
    decided: str  # how the verdict is decided, for the report
    needs_energy: bool = False  # an energy counter (RAPL or an NVIDIA GPU) must be readable
    #: minutes per plan on 2 cores, for the study (0 when another claim's study holds the
    #: runs); quick: measured on a shared 2-core machine, full: estimated from per-run times
    minutes: dict[str, float] = field(default_factory=dict)


CLAIMS: tuple[Claim, ...] = (
    Claim(1, TRAINING_PAPER, "abstract and findings: default hyper-parameters do not carry "
          "over between frameworks",
          "One framework's default hyper-parameters do not carry over to another: the same "
          "preset (Caffe's LeNet settings, TensorFlow's MNIST settings, ...) applied to every "
          "framework gives different accuracy and time.",
          "claim1-presets",
          "For each preset, every pair of frameworks is rank-tested on final test accuracy and "
          "on train time; it holds when, for every preset, a pair is separated on accuracy and a "
          "pair on time.",
          minutes={"quick": 3.0, "full": 90.0}),
    Claim(2, TRAINING_PAPER, "abstract, first contribution: hyper-parameters' impact on "
          "performance and accuracy",
          "Hyper-parameters (batch size, learning rate) change training time and accuracy, by "
          "different amounts per framework.",
          "claim2-hyperparameters",
          "Per framework, the largest against the smallest value of each varied "
          "hyper-parameter on train time and on accuracy (holds when every framework is "
          "separated on each); then the frameworks' train-time ratios (paired by seed) "
          "against each other.",
          minutes={"quick": 3.0, "full": 90.0}),
    Claim(3, TRAINING_PAPER, "abstract, second contribution: configuring parallel computing "
          "libraries",
          "Configuring the parallel computing libraries (threads, OpenMP runtime, allocator, "
          "oneDNN) improves training time, and the best setting differs per framework.",
          "claim3-libraries",
          "Per framework, each library setting's runs against the same framework's runs at "
          "the default on train time; it holds when a setting is separated faster, and the "
          "frameworks' best settings differ (or one's best is separated slower in another).",
          minutes={"quick": 4.0, "full": 40.0}),
    Claim(4, TRAINING_PAPER, "abstract, third contribution: resource consumption patterns",
          "Resource use (CPU, memory) differs per framework and correlates with "
          "hyper-parameters (batch size and memory above all).",
          "claim2-hyperparameters",
          "Judged on claim 2's runs: frameworks rank-tested against each other on peak memory "
          "and CPU % at each batch size (holds when a pair is separated), and per framework "
          "peak memory at the largest batch against the smallest (holds when larger in "
          "every framework).",
          minutes={"quick": 0.0, "full": 0.0}),
    Claim(5, INFERENCE_PAPER, "findings: runtime settings",
          "Runtime settings (batch size, threads, graph optimization, precision) change "
          "latency, throughput and memory significantly.",
          "claim5-runtime-settings",
          "Per varied setting (the others at their first value) and runtime: largest against "
          "smallest value on single-stream p50, offline throughput and peak memory; it holds "
          "when every setting separates at least one of them in every runtime.",
          minutes={"quick": 1.5, "full": 12.0}),
    Claim(6, INFERENCE_PAPER, "findings: runtimes compared on CPU (and GPU)",
          "ONNX Runtime is fastest at small batches; throughput saturates around batch "
          "32-64; OpenVINO is best on CPU (TensorRT on GPU, where one exists).",
          "claim6-runtimes",
          "ONNX Runtime's single-stream p50 at the smallest batch separated below every other "
          "runtime's; per runtime, throughput at 32 separated above the smallest batch and "
          "less than 10 % more at the largest batch than at 64; OpenVINO's throughput at the "
          "largest batch separated above every other runtime's. The GPU part needs an "
          "NVIDIA GPU and TensorRT.",
          minutes={"quick": 3.5, "full": 30.0}),
    Claim(7, INFERENCE_PAPER, "findings: co-located model copies",
          "Co-located copies of a model on one device trade throughput against memory.",
          "claim7-copies",
          "Per runtime and copy mode (processes, threads), the most copies against one copy "
          "(the ensemble scenario: every copy serving at once): it holds when the copies' "
          "total throughput and their peak memory are both separated above one copy's.",
          minutes={"quick": 1.5, "full": 25.0}),
    Claim(8, INFERENCE_PAPER, "findings: energy",
          "Energy per prediction falls as throughput rises (where an energy counter is "
          "readable).",
          "claim6-runtimes",
          "Judged on claim 6's runs: Spearman's rank correlation between offline throughput "
          "and energy per 1,000 predictions over every run and batch size; it holds when "
          "negative with p below 0.05.",
          needs_energy=True, minutes={"quick": 0.0, "full": 0.0}),
)
BY_NUMBER = {c.number: c for c in CLAIMS}


def parse_claims(text: str | None) -> list[Claim]:
    """``"1,3,6"`` -> those claims in order; None or empty -> all of them."""
    if not text:
        return list(CLAIMS)
    chosen = []
    for item in (i.strip() for i in text.split(",")):
        if not item.isdigit() or int(item) not in BY_NUMBER:
            raise ConfigError(f"--claims: unknown claim {item!r}; the claims are numbered "
                              f"1 to {len(CLAIMS)} (e.g. --claims 1,3,6)")
        if BY_NUMBER[int(item)] not in chosen:
            chosen.append(BY_NUMBER[int(item)])
    return sorted(chosen, key=lambda c: c.number)
