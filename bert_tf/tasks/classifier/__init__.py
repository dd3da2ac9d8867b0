"""Sentence(-pair) classification: the GLUE/XNLI/TSV readers (`data`), the
features and input_fns (`features`), the heads as values (`model`), the task
that reads, writes records, trains and exports (`task`) and the metrics
(`metrics`)."""
