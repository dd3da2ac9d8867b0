"""SQuAD 1.1/2.0: examples, features, predictions and the official metrics."""
