"""The metrics, one module per family. The metric registry (``fitness.metric.METRICS``) imports these
files when a name is first asked for: a new metric is one new file here, with no list to edit."""

from fitness.metrics.normalize import normalize_answer  # noqa: F401 - the answer normalisation metrics share
