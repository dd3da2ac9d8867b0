"""Running a script's `model_fn`: one interface, two implementations.

Every script builds a `model_fn(features, labels, mode, params)` and input
functions, as the reference does, and hands them to a runner
(`select.make_runner`) that trains, evaluates and predicts:

* `estimator.py`: the TPUEstimator (or, under a tf.distribute strategy, a
  plain Estimator), as in the reference. It needs `tf.estimator`, which
  TensorFlow removed in 2.16; TPUs need it.
* `session.py`: a runner on core TensorFlow (`MonitoredTrainingSession`,
  `Scaffold`, hooks, `tf.distribute`), for every TensorFlow from 2.15 on.
  It builds the same graph, so the numbers are the same.

`spec.py` holds what a `model_fn` returns (`ModelSpec`, a TPUEstimatorSpec
on the Estimator's stack) and the mode names; `config.py` the settings both
runners share (session config, seed, checkpoints), read from a run's
`RunOptions`; `--runner=auto|estimator|session` picks one.
"""
