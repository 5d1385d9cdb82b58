"""The task families, one module per family. The task registry (``fitness.registry.TASKS``) imports
these files when a name is first asked for: a new task is one new file here, with no list to edit."""
