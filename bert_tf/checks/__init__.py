"""Checks of a run's inputs and surroundings, each refusing in one line.

A `bert_config.json` (`config`), a checkpoint (`checkpoint`), which TFRecord
file a `DataLossError` came from (`records`), a write that hit a full disk
(`disk`), the lock that keeps two training runs out of one folder
(`lock`), the range of every number flag (`numbers`), and `Problems`, which
collects the start-up problems of a run to report them together
(`problems`).
"""
