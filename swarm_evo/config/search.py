"""``search``: the search, its budget, its policy and what it selects on (SPEC §6, §12)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from swarm_evo.config.base import Section


SearchPolicy = Literal["two_phase", "greedy", "random"]
"""The search policies (SPEC §12 ablations; :mod:`swarm_evo.search.policies`)."""

FitnessSource = Literal["auto", "hidden", "printed"]
"""What a competition run selects on (issue 41): ``hidden`` (the host grades rows of the training
data no program sees the labels of), ``printed`` (the metric the program prints) or ``auto``
(hidden where the competition's layout allows the split, else printed, said at start)."""


class SearchConfig(Section):
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
    parallel_workers: int = Field(2, ge=1, description="Execution slots: programs that run at once (the GPU slots "
                                  "replace it when sandbox.gpus is given); a program holds one only while it runs.")
    proposal_backlog: int | None = Field(
        None, ge=0, description="Steps in flight beyond one per execution slot (issue 52): their programs are written "
        "and reviewed while other programs run. None = one per slot; 0 = one step per slot, which then waits while "
        "the model writes and reviews.")
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

