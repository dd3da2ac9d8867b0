"""The command line every script shares: flags, start-up checks, errors.

`flags.py` holds the table of the shared flags, `entry.py` runs a script's
`main` (one-line errors), `startup.py` the start-up checks of the model,
`fine_tuning.py` a fine-tuning script's training, model_fn and export,
`quiet.py` keeps TensorFlow's start-up lines off the console of a command
(`quiet.when_run_as_command`, each script's first statement). Importing
this package changes nothing in the process.
"""
