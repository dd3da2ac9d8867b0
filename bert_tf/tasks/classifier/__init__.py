"""Sentence(-pair) classification: the GLUE/XNLI/TSV readers (`data`), the
features and input_fns (`features`), the head and model_fn (`model`) and the
metrics (`metrics`)."""
