"""The command line every script shares: flags, start-up checks, errors.

`flags.py` holds the table of the shared flags, `entry.py` runs a script's
`main` (one-line errors), `startup.py` the start-up checks of the model.

Importing this package quiets TensorFlow's C++ start-up log
(`quiet.quiet_tensorflow`) before any module here imports TensorFlow, which
reads the level once, when it is imported. So a script's first import is
`import bert_tf.cli` (tests/test_startup.py checks every script's).
"""

from bert_tf.cli import quiet

quiet.quiet_tensorflow()
