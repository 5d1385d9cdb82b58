"""A whole run: the experiment (model, task, scorer, instances) and the search → ship → compare →
report stages the ``search`` and ``resume`` commands drive."""
