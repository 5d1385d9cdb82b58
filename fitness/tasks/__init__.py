"""The task families; importing this package registers them all (one module per family)."""

from fitness.tasks import gsm8k, longbench, niah, passkey, ruler_niah, variable_tracking, word_extraction  # noqa: F401
