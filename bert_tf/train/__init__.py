"""Training: options, the estimator set-up, tf.distribute and the hooks."""
