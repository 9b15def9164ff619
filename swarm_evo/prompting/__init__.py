"""What the model is shown (SPEC §7): the Jinja2 prompt templates' rendering, the bounds that keep
every text within the model's context window (issue 13), and the bounded preview of a
competition's public data (tables, images, formatting).

- :mod:`~swarm_evo.prompting.prompts`: ``render``, ``measure``, the templates directory;
- :mod:`~swarm_evo.prompting.text_bounds`: ``PromptLimits``, ``prompt_limits``, bounding helpers;
- :mod:`~swarm_evo.prompting.data_preview` (+ ``_tables``, ``_images``, ``_format``).

May import: nothing else of swarm_evo.
"""
