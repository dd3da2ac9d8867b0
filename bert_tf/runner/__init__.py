"""Running a script's `model_fn`: how a script trains, on two runners.

`loop.py` owns how every training script runs: the output folder's lock,
the hooks, training with the SIGTERM/Ctrl-C checkpoint-and-exit and the
evaluation every N steps with the best checkpoint and early stopping, then
evaluation, prediction and export (`loop.run`). It hands the script's
`model_fn(features, labels, mode, params)` and input functions to a runner
(`select.make_runner`) that trains, evaluates and predicts:

* `estimator.py`: the TPUEstimator (or, under a tf.distribute strategy, a
  plain Estimator), as in the reference. It needs `tf.estimator`, which
  TensorFlow removed in 2.16; TPUs need it.
* `session.py`: a runner on core TensorFlow (`MonitoredTrainingSession`,
  `Scaffold`, hooks, `tf.distribute`), for every TensorFlow from 2.15 on.
  It builds the same graph, so the numbers are the same.

`config.py` holds the settings both runners share (session config, seed,
checkpoints, the summary interval), read from a run's `RunOptions`;
`--runner=auto|estimator|session` picks one. What a `model_fn` returns is
`bert_tf/train/spec.py`'s.
"""
