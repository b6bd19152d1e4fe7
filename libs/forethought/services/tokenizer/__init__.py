"""The tokenizer service. ``shell`` wires it; ``python -m forethought.services.tokenizer`` runs it."""
