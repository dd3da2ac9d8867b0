"""A command's flags, parsed before TensorFlow loads.

A script calls `parse_when_run_as_command(__name__, define_flags)` after
its light imports (absl, the flag table) and before those that load
TensorFlow, which take seconds: run as a command, `--help`, `--helpfull`,
a flag that does not parse and a missing required flag then answer at
once, in one line for errors; imported as a module (tests, a user's code),
it does nothing. `entry.run_main` parses the same command line again once
the script has loaded.
"""

import os
import sys

from absl import app
from absl import flags

from bert_tf.cli import quiet
from bert_tf.train import choices

__all__ = ["parse_when_run_as_command", "parse_flags", "show_in_help"]


def parse_when_run_as_command(module_name, define_flags):
  """Defines and parses the flags when `module_name` runs as a command.

  Args:
    module_name: str, the script's `__name__`.
    define_flags: the script's `define_flags()`.

  Exits (status 1) on `--help`/`--helpfull` or a flag problem, printing
  absl's help, or `error: <problem> (see --helpfull)`.
  """
  if not quiet.is_command(module_name):
    return
  define_flags()
  show_in_help(module_name)
  app.define_help_flags()
  parse_flags(sys.argv)


def parse_flags(argv, again=False):
  """absl's flag parsing, with a parsing error as one `error:` line.

  `--use_xla` switches on XLA's CPU clustering here, the one moment it can:
  TensorFlow reads TF_XLA_FLAGS once, when it first lists its devices.

  Args:
    argv: list of str, the command line.
    again: bool, the flags were parsed from this command line before
      (`parse_when_run_as_command`): reset first, so that a repeated flag
      is not counted twice.

  Returns:
    The arguments that are not flags, `argv[0]` first.
  """
  if again and flags.FLAGS.is_parsed():
    flags.FLAGS.unparse_flags()
  try:
    argv = flags.FLAGS(argv)
  except flags.Error as e:
    if os.environ.get("BERT_DEBUG"):
      raise
    sys.stderr.write("error: %s (see --helpfull)\n" % " ".join(str(e).split()))
    sys.stderr.flush()
    sys.exit(1)
  if "use_xla" in flags.FLAGS and flags.FLAGS.use_xla:
    choices.enable_xla_cpu_clustering()
  return argv


def show_in_help(module_name):
  """Makes `--help` list the flags of module `module_name`.

  absl's `--help` lists the flags of the module named `sys.argv[0]`, where
  `python run_classifier.py` defines them; an installed console script
  (`bert-run-classifier`) imports the script as a module instead, whose
  flags are then declared key flags of `sys.argv[0]` (and its docstring
  becomes the usage text).
  """
  if module_name in ("__main__", sys.argv[0]):
    return
  for flag in flags.FLAGS.flags_by_module_dict().get(module_name, []):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  entry = sys.modules.get("__main__")
  if entry is not None and not entry.__doc__:
    entry.__doc__ = sys.modules[module_name].__doc__
