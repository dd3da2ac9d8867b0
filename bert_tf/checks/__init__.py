"""Checks of inputs and of the run: configs, checkpoints, records, disk, lock."""
