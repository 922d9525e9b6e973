"""Layer 2, target: targets, the one instruction catalogue, the layout model, shared-memory layouts,
hardware limits and heuristic seed tables. Imports only ``core``."""
