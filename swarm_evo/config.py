"""Run configuration: one YAML file validated by pydantic, overridable by flags (SPEC §13).

Every key is read somewhere and unknown keys are errors, so a typo in a config file fails
before any work with the file, the key and the fix. Defaults are the seeds' values
(seed 000 decisions A–M; SPEC §13).

May import: sandbox (the backends' defaults and limits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from swarm_evo.sandbox import backends
from swarm_evo.sandbox.disk_limit import DEFAULT_DISK_LIMIT_MB
from swarm_evo.sandbox.docker_sandbox import DEFAULT_IMAGE
from swarm_evo.sandbox.preload import DEFAULT_PRELOAD
from swarm_evo.sandbox.gpus import parse_gpus


class ConfigError(ValueError):
    """A configuration file or override that cannot be used; the message names file, key and fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


SearchPolicy = Literal["two_phase", "greedy", "random"]
"""The search policies (SPEC §12 ablations; :mod:`swarm_evo.search.policies`)."""

FitnessSource = Literal["auto", "hidden", "printed"]
"""What a competition run selects on (issue 41): ``hidden`` (the host grades rows of the training
data no program sees the labels of), ``printed`` (the metric the program prints) or ``auto``
(hidden where the competition's layout allows the split, else printed, said at start)."""


class SearchConfig(_Section):
    """The search (SPEC §6; seed 000 decisions A, B, D, G, H, I) and its policy (SPEC §12)."""

    policy: SearchPolicy = Field(
        "two_phase",
        description="Search policy: two_phase (draft, then merge/mutate; SPEC §6), greedy (AIDE: 5 drafts, "
        "then improve the best node or, with probability 0.5, debug a buggy leaf, debug depth <= 3) or "
        "random (drafts only). All share max_steps, the sandbox, the model and the inner debug chain; "
        "phase1_target_nodes, tournament_k and merge_probability apply to two_phase only.",
    )
    max_steps: int = Field(100, ge=1, description="Budget: journal nodes, dead and alive (I, J).")
    time_limit: float = Field(43_200, gt=0, description="Wall-clock limit of the run, seconds.")
    steps_per_epoch: int = Field(10, ge=1, description="Nodes per epoch: epoch k ends when the journal holds k · this many nodes (node table, agent evolution; the steps never wait for it).")
    phase1_target_nodes: int = Field(8, ge=1, description="K: no new draft starts once this many nodes are valid; drafts still running count (A, B).")
    debug_max_attempts: int = Field(2, ge=0, description="Chained debug attempts per node (D).")
    parallel_workers: int = Field(2, ge=1, description="Steps run at once: each starts as soon as one ends (no epoch barrier).")
    tournament_k: int = Field(3, ge=1, description="Tournament size for the mutate parent (H).")
    merge_probability: float = Field(0.5, ge=0, le=1, description="Share of merges in Phase 2 (C).")
    stub_threshold: int = Field(20, ge=0, description="Code characters below which a gene is a stub.")
    fitness: FitnessSource = Field(
        "auto", description="Competitions: select on a hidden validation split the host grades (hidden), on "
        "the program's printed validation metric (printed), or hidden where the competition's layout allows "
        "it (auto: built-ins and MLE-bench training tables / labelled image folders; else printed, said at "
        "start). Forcing hidden where no split is possible is bad input. Problems: unchanged (their "
        "evaluator is the host's).",
    )
    hidden_fraction: float = Field(
        0.15, gt=0, lt=0.5, description="Share of the public training rows held out as the hidden split "
        "(stratified on the target for classification; grouped by hidden_group_column when set).",
    )
    hidden_group_column: str | None = Field(
        None, description="A column of the training table whose groups stay whole in the hidden split "
        "(rows of one group are all hidden or all kept), e.g. a patient or session id. Unset: a column whose "
        "test values the training rows never hold while repeating them is found and used (issue 53).",
    )
    hidden_time_column: str | None = Field(
        None, description="A date column of the training table (2021-03-04, 2021/3/4 10:00): the latest "
        "hidden_fraction of the training rows by it are hidden, as a test set that follows the training data "
        "in time. Unset: a date column whose test dates follow the training dates is found and used (issue 53). "
        "Not with hidden_group_column.",
    )
    final_refit: bool = Field(
        True, description="With hidden fitness: run the chosen program once more on the full training "
        "data (hidden rows put back) for the hand-in, within the time left; its original submission is "
        "handed in when that run fails or finds no time.",
    )
    subflow_heartbeats: bool = Field(
        False, description="Prefect flow-run heartbeats for the subflows of a run: phase flows, steps and "
        "debug attempts (off: up to 1 s less per subflow; the top-level flow run keeps its heartbeats for "
        "zombie detection).",
    )


class ModelConfig(_Section):
    """The LLM (SPEC §7). ``name`` is a litellm model name or ``offline``."""

    name: str = Field("offline", description="litellm model that writes code, e.g. openai/gpt-4o-mini, or 'offline'.")
    review_name: str | None = Field(
        None, description="litellm model that reviews executed programs (default: name); AIDE's feedback model."
    )
    evolution_name: str | None = Field(None, description="litellm model that rewrites agents (default: name).")
    api_base: str | None = Field(None, description="Base URL for vLLM/Ollama/proxies (all roles).")
    temperature: float = Field(0.5, ge=0, le=2)
    max_tokens: int | None = Field(
        None, ge=16, description="Upper bound on a reply's tokens (None: the provider's default)."
    )
    drop_params: bool = Field(
        True, description="litellm drop_params: leave out parameters a model rejects (e.g. temperature "
        "for reasoning models) instead of failing the call.",
    )
    context_window: int | None = Field(
        None, ge=1024, description="The model's context window in tokens; None: litellm's number for "
        "the model, else 32768. Prompts are bounded to fit it.",
    )
    tool_calls: Literal["auto", "on", "off"] = Field(
        "auto", description="Reviews as forced tool calls: on, off (a JSON object in the reply text) or "
        "auto (JSON text where litellm says the model has no tool calls, else tool calls first; a server "
        "that rejects tools switches the run to JSON text, with a warning).",
    )
    timeout: float = Field(600, gt=0, description="Seconds per LLM call (cut to the run's remaining time).")
    num_retries: int = Field(2, ge=0, description="litellm retries for transient errors (cut to the remaining time).")
    max_consecutive_failures: int = Field(
        5, ge=1, description="Generation failures in a row (model errors after their retries, replies "
        "without a program) after which the run stops with exit 1; resume it once the model works "
        "(a resumed run counts only the failures since it resumed).",
    )
    max_cost_usd: float | None = Field(
        None, gt=0, description="Stop starting steps once the run's LLM cost reaches this many USD "
        "(every call counts, failed and preflight ones too); None: no limit. Every model of the run must "
        "have a price (litellm's, or input_cost_per_token/output_cost_per_token): a run refuses to start otherwise.",
    )
    input_cost_per_token: float | None = Field(
        None, ge=0, description="USD per prompt token (litellm custom pricing): the price of model.name, "
        "and of a review_name/evolution_name model litellm has no price for (local models); a model litellm "
        "prices keeps litellm's price.",
    )
    output_cost_per_token: float | None = Field(None, ge=0, description="USD per completion token (see input_cost_per_token).")
    fault_rate: float = Field(0.2, ge=0, le=1, description="Offline model: chance of a planted bug.")
    repair_rate: float = Field(0.8, ge=0, le=1, description="Offline model: chance a debug repairs it.")
    injected_failure_rate: float = Field(
        0.0, ge=0, le=1,
        description="Offline model only, for reliability testing: chance that a call fails on purpose "
        "(timeout, 429, 5xx, a reply without code, invalid tool-call JSON or an empty reply; "
        "swarm_evo/llm/offline/failures.py).",
    )

    @model_validator(mode="after")
    def _pricing_pairs(self) -> "ModelConfig":
        if (self.input_cost_per_token is None) != (self.output_cost_per_token is None):
            raise ValueError(
                "input_cost_per_token and output_cost_per_token go together: set both (USD per token), or neither"
            )
        return self

    @model_validator(mode="after")
    def _injection_needs_offline(self) -> "ModelConfig":
        if self.injected_failure_rate and not (self.name == "offline" or self.name.startswith("offline/")):
            raise ValueError(
                f"injected_failure_rate applies to the offline model only (model.name is {self.name!r}): "
                "set model.injected_failure_rate to 0, or model.name to offline"
            )
        return self


BackendName = Literal[backends.NAMES]
"""A sandbox backend's name (:mod:`swarm_evo.sandbox.backends`)."""


class SandboxConfig(_Section):
    """Where generated programs run (SPEC §10). Keys marked (docker) or (local) apply to that backend
    only (:data:`swarm_evo.sandbox.backends.BACKENDS`, ``Backend.keys``)."""

    backend: BackendName = Field(backends.NAMES[0], description="The backend that runs programs: "
                                 + backends.help_text() + ".")
    exec_timeout: float = Field(3_600, gt=0, description="Seconds per execution (capped by the time limit).")
    max_output_bytes: int = Field(1_000_000, ge=1_000, description="Captured stdout+stderr cap.")
    memory_limit_mb: int | None = Field(
        None, ge=64,
        description="Memory of one execution, swap included: local: a memory cgroup for its processes and "
        "its /tmp, /var/tmp, /dev/shm files together (without one: RLIMIT_DATA per process, with a warning); "
        "docker: the container's limit (default for both: 80 % of host memory / parallel_workers).",
    )
    python: str | None = Field(
        None, min_length=1,
        description="(local) interpreter, or virtual environment directory, that runs programs (default: the "
        "program environment `swarm-evo env build` made, .venv-programs, else the project's own interpreter).",
    )
    preload: list[str] = Field(
        list(DEFAULT_PRELOAD),
        description="(local) Modules a program server imports once; each execution is forked from it, confined "
        "as a new interpreter would be, and finds them already imported (≈ 1.3 s of CPU saved per program that "
        "imports pandas and scikit-learn). Modules the interpreter lacks are skipped; [] starts a new "
        "interpreter per execution.",
    )
    image: str = Field(DEFAULT_IMAGE, min_length=1, description="(docker) sandbox runtime image.")
    gpus: Literal["all"] | int | list[str] | None = Field(
        None, description="GPUs for programs: none, all, a count N (the first N), or device ids [0, 1] / '0,1' / "
        "GPU-<uuid>. Each GPU is a device group; an execution sees only its group's GPUs (CUDA_VISIBLE_DEVICES; local: "
        "only its /dev/nvidia* nodes; docker: a device request). With GPUs the run's execution slots are GPUs x "
        "slots_per_gpu (in place of search.parallel_workers). Without GPUs, local programs see no /dev/nvidia*."
    )
    slots_per_gpu: int = Field(
        1, ge=1,
        description="Executions that share one GPU at once (with gpus). GPU memory is not divided: they share it.",
    )
    cpus: float | None = Field(None, gt=0, description="(docker) CPUs per container (default: cores / parallel_workers).")
    pids_limit: int = Field(
        512, ge=16,
        description="Processes and threads per execution (docker: per container; local: RLIMIT_NPROC on "
        "top of what the program's user already runs, not enforced for root).",
    )
    shm_size_mb: int = Field(1024, ge=16, description="Size of /dev/shm (docker; local when run as root: a private tmpfs).")
    disk_limit_mb: int = Field(
        DEFAULT_DISK_LIMIT_MB, ge=16,
        description="Disk space (MiB) one execution may fill in its node directory, and the largest file it may "
        "write (local: RLIMIT_FSIZE; docker: fsize ulimit). Past it the program is stopped: DiskLimitError.",
    )
    network: bool = Field(
        False,
        description="Give programs the host's network (local: no network namespace; docker: network_mode host), "
        "for programs that must download; by default they reach nothing, not even the host's loopback services.",
    )
    allow_unconfined: bool = Field(
        False,
        description="(local) Where programs cannot be confined (no PID/user namespaces: a container without "
        "CAP_SYS_ADMIN, a kernel that refuses user namespaces), run them anyway, able to read the answers and "
        "host files and reach the network, with a warning in the run's first lines and its report; by default "
        "such a setup refuses to start.",
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _normalise_gpus(cls, value: object) -> object:
        spec = parse_gpus(value)
        return list(spec) if isinstance(spec, tuple) else spec

    @model_validator(mode="after")
    def _slots_need_gpus(self) -> "SandboxConfig":
        if self.slots_per_gpu != 1 and self.gpus is None:
            raise ValueError(
                f"slots_per_gpu={self.slots_per_gpu} shares GPUs, but sandbox.gpus is none: give the GPUs "
                "(sandbox.gpus: all, a count or device ids; --gpus) or leave slots_per_gpu at 1"
            )
        return self


class AgentsConfig(_Section):
    """Agents, dispatcher, experience pool and agent evolution (SPEC §9; seed 000 K)."""

    num_agents: int = Field(4, ge=1, description="Agents with their own role and strategy texts.")
    epsilon: float = Field(0.3, ge=0, le=1, description="Dispatcher: chance of a random agent (ε-greedy).")
    ema_alpha: float = Field(0.3, gt=0, le=1, description="Dispatcher: weight of the newest quality in the EMA.")
    evolution_interval: int = Field(3, ge=1, description="Evolve agents every N global epochs (both phases).")
    evolution_min_records: int = Field(20, ge=0, description="Experience records needed before evolving agents.")
    experience_top_k: int = Field(5, ge=0, description="Examples of the same operation shown in a prompt.")


class ProblemConfig(_Section):
    """The optimisation problem's own choices (SPEC §11); ignored by competition runs."""

    instance: str | None = Field(
        None,
        description="Instance of a problem that has several (problem.yaml instances), e.g. kroA100 for tsp: "
        "the data file tsp/kroA100.tsp under the data directory; None = the problem's default instance. "
        "An error for a problem without instances and for competitions.",
    )


DEFAULT_MAX_FILE_MB = 1024
"""Default ``store.max_file_mb``: files larger than this (MiB) are neither mirrored nor fetched."""


class StoreConfig(_Section):
    """The run store (issue 34; docs/many-machines.md): where the run directory is mirrored, and
    the largest file that goes there. A config file may give ``store: URL`` for ``store.url``."""

    url: str | None = Field(
        None,
        description="Run store: a directory or an fsspec URL (s3://bucket/prefix, gs://..., sftp://...) that the "
        "run directory is mirrored to, as STORE/runs/<run name>/, so any machine can read or resume the run "
        "(default: $SWARM_EVO_STORE; none: the run directory only). Credentials never go in the URL.",
    )
    max_file_mb: int = Field(
        DEFAULT_MAX_FILE_MB, ge=1,
        description="Files larger than this (MiB) are neither mirrored to the store nor fetched from it; each is "
        "recorded in the run report (issue 40, item 7).",
    )

    @model_validator(mode="before")
    @classmethod
    def _url_alone(cls, value: object) -> object:
        return {"url": value} if value is None or isinstance(value, str) else value


class RunConfig(_Section):
    """The whole configuration of one run."""

    seed: int = 0
    mlebench_repo: str | None = Field(
        None,
        description="An mle-bench checkout: a competition's config.yaml, description and leaderboard.csv "
        "missing under data_dir are read from its mlebench/competitions/<id>/ (default: $MLEBENCH_REPO).",
    )
    store: StoreConfig = Field(default_factory=StoreConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    problem: ProblemConfig = Field(default_factory=ProblemConfig)

    def with_overrides(self, overrides: dict[str, Any]) -> "RunConfig":
        """Return a copy with dotted-key overrides applied, e.g. ``{"search.max_steps": 30}``.

        None values are skipped (an unset flag). Raises ConfigError naming the key.
        """
        data = self.model_dump()
        for dotted, value in overrides.items():
            if value is None:
                continue
            *parents, leaf = dotted.split(".")
            target = data
            for part in parents:
                if part not in target or not isinstance(target[part], dict):
                    raise ConfigError(f"unknown configuration key '{dotted}'")
                target = target[part]
            if leaf not in target:
                raise ConfigError(f"unknown configuration key '{dotted}'")
            target[leaf] = value
        return _validate(data, source="overrides")


def _validate(data: Any, source: str) -> RunConfig:
    try:
        return RunConfig.model_validate(data or {})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"unknown key '{key}' (remove it; see swarm_evo/config.py for the keys)")
            elif isinstance(err.get("input"), dict):  # a rule across keys of a section
                problems.append(f"'{key}': {err['msg'].removeprefix('Value error, ')}")
            else:
                problems.append(f"'{key}': {err['msg']} (got {err.get('input')!r})")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def read_config_file(path: Path) -> dict:
    """The mapping a YAML config file holds (``{}`` for an empty file), not yet validated: what
    a sweep on a deployment sends to runs on other machines instead of the file's path
    (``two_phase_evo(config_data=...)``), since those machines need not see the file.

    Raises:
        ConfigError: unreadable file, invalid YAML, or a top level that is not a mapping; the
            message names the file.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML ({exc})") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (search, model, sandbox, agents, problem)")
    return data or {}


def config_from_mapping(data: dict, source: str) -> RunConfig:
    """Validate a config mapping (a config file's contents, :func:`read_config_file`).

    Raises:
        ConfigError: unknown key or wrong type; the message starts with ``source`` and names the key.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a config must be a mapping of sections (search, model, sandbox, agents, problem)")
    return _validate(data, source=source)


def load_config(path: Path | None = None) -> RunConfig:
    """Read and validate a YAML config file; None gives the defaults.

    Raises:
        ConfigError: unreadable file, invalid YAML, unknown key or wrong type; the message
            names the file and the key.
    """
    if path is None:
        return RunConfig()
    return _validate(read_config_file(path), source=str(path))
