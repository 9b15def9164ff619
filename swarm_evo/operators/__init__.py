"""The search operations' registry (issue 43): one home for every operation that makes a node.

An operation (draft, merge, mutate; greedy's debug) is one :class:`~.operator.Operator`
record: its name, phase, prompt template, agent text, the offline model's handlers and its
report style. Every list of operations in the code reads :mod:`.registry` (the dispatcher,
the agents' texts and their evolution, the prompt-window check, the offline model, the run
report, the operation statistics, the chart and the evolution tree);
``tests/test_architecture.py`` checks that no other module spells the list out. A new operation
is a record in :mod:`.builtin` (or :func:`~.registry.register` at run time), its template and
agent texts under ``prompt_templates/``, its offline handlers, and the step that prepares it.

- :mod:`~swarm_evo.operators.operator`: ``Operator``, ``AgentText``, ``OfflineHandlers``, ``ReportStyle``;
- :mod:`~swarm_evo.operators.builtin`: the built-in operations;
- :mod:`~swarm_evo.operators.registry`: ``get``, ``names``, ``operators``, ``agent_operations``,
  ``listed_operations``, ``register``, ``registered``.

May import: nothing else of swarm_evo.
"""
