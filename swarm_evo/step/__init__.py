"""The jobs a flow's tasks call, free of Prefect, one module per job. A search step's pieces
(SPEC §6), in step order:

- :mod:`~swarm_evo.step.operations`: select the operation (draft, merge or mutate; under the
  greedy policy also improve or debug) and render its prompt → an ``OperationRequest``;
- :mod:`~swarm_evo.step.request`: ``OperationRequest`` and ``release_request`` (its claims end);
- :mod:`~swarm_evo.step.generation`: generate the program (LLM), the static pre-validation and
  its one self-fix, debug fixes;
- :mod:`~swarm_evo.step.execution`: execute and judge a program through the objective;
- :mod:`~swarm_evo.step.review_call`: the review call, and when the reviewer alone flags a bug;
- :mod:`~swarm_evo.step.assembly`: build the step's node (or a dead node for a failed generation);
- :mod:`~swarm_evo.step.persistence`: append the node, hand in the best work, the run's end;
- :mod:`~swarm_evo.step.final_fit`: the hand-in's program trained once more on the full public
  data (runs with a hidden split, issue 41);
- :mod:`~swarm_evo.step.limits`: the cost and failing-model limits;
- :mod:`~swarm_evo.step.attempt_files`: a debug attempt's files kept beside the node.

Between and before the steps:

- :mod:`~swarm_evo.step.evolve_agents`: an agent evolution after an epoch (SPEC §9);
- :mod:`~swarm_evo.step.problem_setup`: a problem run's initial program and auxiliary metrics.

The debug chain itself is :mod:`swarm_evo.search.debug_chain`. The Prefect flows in ``flows/`` call
these functions through tasks; tests call them directly.

May import: operators, population, evaluation, prompting, llm, learning, search, reporting, objective, store, run.
"""
