"""Training and evaluating the learned per-token scorer (KV Policy): traces, reward, RLOO training,
held-out evaluation. Imports the runtime; the runtime never imports this package."""
