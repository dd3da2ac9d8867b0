"""Training: options, the estimator set-up, tf.distribute, the hooks, and the
machinery behind `optimization.py` (optimizer options, the train op's pieces,
gradient accumulation, loss scaling, keeping the update out of XLA, the
per-variable optimizer base and LAMB)."""
