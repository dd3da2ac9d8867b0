"""The library behind the reference's scripts at the repository root.

The root keeps the reference release's files (`modeling.py`,
`tokenization.py`, `optimization.py` and the scripts) and this project's own
entry points; everything they share lives here, one folder per concern:

* `cli/`: the shared flag table, start-up checks and one-line errors;
* `train/`: training options, the estimator set-up, tf.distribute, hooks;
* `checks/`: checks of configs, checkpoints, records, disk and locks;
* `tasks/`: data, features and metrics of each task;
* `export/`: SavedModel export and serving;
* `convert/`: checkpoint conversion to and from Hugging Face folders;
* `io.py`: files: reading lines, atomic writes, globs, feature encoders.

Dependencies point down: the scripts import this package, and nothing here
imports a script.
"""

# Before any module of the package imports TensorFlow (bert_tf.export.serving
# imported alone printed TensorFlow's C++ start-up errors): its C++ log level
# is read once, at import.
import bert_tf.cli  # pylint: disable=unused-import,g-import-not-at-top
