"""Pre-training data: record encoding, shuffling, worker processes."""
