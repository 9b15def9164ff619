"""swarm-evo's domain core: the two-phase evolutionary search, free of Prefect.

A folder is a room. The units below go from the lowest layer to the highest; each package's
``__init__`` docstring says what it holds and, on its ``May import:`` line, which units
before it it may import. A unit never imports one listed after it, nothing here imports
Prefect, flows/, tasks/ or blocks/ (the CLI imports ``flows`` lazily, inside its commands),
and type-only imports under ``if TYPE_CHECKING:`` do not count. tests/test_architecture.py
checks all of it.

- sandbox/: running an untrusted program (local process, Docker), and reading its output safely
- config/: the run configuration (``RunConfig``), one module per section, its YAML file and its errors
- operators/: the search operations' registry: name, phase, template, agent text, the offline
  model's handlers and the report style of draft, merge, mutate and greedy's debug
- competition/: MLE-bench competitions: layout, preparation, graders, grading, medals
- population/: the population: a node, its genes, the journal of every node
- store/: the run store (an fsspec URL): mirroring a run directory to it, reading runs back
- evaluation/: the Eval Service: task-agnostic evaluation of a program (problems)
- prompting/: prompt templates, text bounds and the data preview shown to the model
- llm/: every model call (litellm), reading replies, the call ledger, the offline model
- learning/: what the search learns from its history: agents, dispatcher, experience, node
  quality, the evolution log, agent evolution's rules
- search/: the evolutionary operators' rules: pheromone, selection, review, debug chain,
  static checks, merge compatibility, ablation policies
- reporting/: views of a journal for people: reports, run report, operation statistics, charts,
  the evolution tree
- objective/: what a run optimises, a competition or a problem, behind one interface
- run/: a run's shared state: the session, budget, resume, the start checks of prompts, what a
  model call is given
- step/: the jobs a flow's tasks call: one search step's parts, agent evolution, problem setup
- sweeps/: benchmark sweeps: the plan, rows and statistics
- cli/: the ``swarm-evo`` command line
"""
