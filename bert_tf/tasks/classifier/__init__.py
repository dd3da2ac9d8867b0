"""Sentence(-pair) classification: the GLUE/XNLI/TSV readers and metrics."""
