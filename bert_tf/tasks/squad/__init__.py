"""SQuAD 1.1/2.0: examples and features (`data`), the span head and model_fn
(`model`), predictions (`predictions`), the official metrics (`metrics`) and
the task (`task`: `SquadTask`)."""
