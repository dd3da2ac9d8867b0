"""The library behind the reference's scripts at the repository root.

The root keeps the reference release's files (`modeling.py`,
`tokenization.py`, `optimization.py` and the scripts) and this project's own
entry points; everything they share lives here, one folder per concern:

* `cli/`: the shared flag table, start-up checks, one-line errors and the
  quieting of TensorFlow's start-up lines for the commands;
* `runner/`: how a script trains, evaluates, predicts and exports
  (`loop.py`), on the Estimator or the session runner;
* `train/`: training options, the optimizers and train op, gradient
  accumulation, loss scaling, tf.distribute, the hooks, the best checkpoint;
* `checks/`: checks of configs, checkpoints, records, disk and locks;
* `tasks/`: data, features, model heads and metrics of each task;
* `export/`: SavedModel export and serving;
* `convert/`: checkpoint conversion to and from Hugging Face folders;
* `corpus/`: corpus-scale data on Apache Beam, and vocabularies;
* `json_file.py`: every JSON input, read with a depth limit and checked
  for shape, each problem in one line naming the key path;
* `io.py`: files: reading lines, atomic writes, globs, feature encoders;
* `tf_private.py`: every use of TensorFlow's private API.

Dependencies point down: the scripts import this package, and nothing here
imports a script or the root `optimization.py`. Importing the package
changes nothing in the process (no environment variable, logging level or
import hook).
"""
