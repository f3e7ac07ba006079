"""bench-ledger core: models, store, provenance and rules."""
