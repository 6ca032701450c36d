"""The agent's side of plugins: lifecycle hooks, what a plugin's ``setup`` gets,
and what a plugin imports (``plugins.api``)."""
