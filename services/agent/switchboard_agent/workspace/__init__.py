"""The agent workspace: its bootstrap files and their templates, and its skills."""
