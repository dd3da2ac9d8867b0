"""Runs a script's `main`: flag parsing, XLA's switch, one-line errors.

Bad input (a flag that does not parse, a missing file, a damaged record, a
full disk) is reported as one line, `error: ...`, with exit status 1, rather
than a traceback; `BERT_DEBUG=1` brings the traceback back.
"""

import functools
import os
import signal
import sys

from absl import app
from absl import flags
import tensorflow.compat.v1 as tf

from bert_tf import tf_private
from bert_tf.checks import disk
from bert_tf.cli import flags_first
from bert_tf.cli import leftovers
from bert_tf.cli import quiet
from bert_tf.checks import records
from bert_tf.convert import sources

__all__ = ["run_main", "one_line", "Terminated"]

_USER_ERRORS = (ValueError, OSError, tf.errors.NotFoundError,
                tf.errors.InvalidArgumentError,
                tf.errors.FailedPreconditionError,
                tf.errors.PermissionDeniedError, tf.errors.AlreadyExistsError,
                tf.errors.DataLossError)


def _is_user_error(error):
  """Bad input, or a write that hit a full disk (TensorFlow reports EFBIG
  as `OutOfRangeError`, ENOSPC as `ResourceExhaustedError`)."""
  return isinstance(error, _USER_ERRORS) or disk.is_disk_full(error)


def one_line(error):
  """The essential message of `error` on one line.

  TensorFlow's graph-execution errors carry the Python stack of the failing
  op; only the lines that say what went wrong are kept. A full disk and a
  damaged TFRecord file get their own wording (`bert_tf.checks.disk`,
  `bert_tf.checks.records`).
  """
  if disk.is_disk_full(error):
    return disk.disk_full_message(_one_line_text(error))
  if isinstance(error, tf.errors.DataLossError):
    return records.explain_data_loss(error, records.record_files_of(error))
  return _one_line_text(error)


def _one_line_text(error):
  if isinstance(error, tf.errors.OpError):
    return disk.essential_text(error)
  return " ".join(str(getattr(error, "message", None) or error).split())


def _fail(message):
  sys.stderr.write("error: %s\n" % message)
  sys.stderr.flush()
  sys.exit(1)


class Terminated(BaseException):
  """SIGTERM outside training: unwinds like Ctrl-C, so every atomic output
  (`bert_tf.io.atomic_path`) removes its temporary name."""


def _terminate_by_exception():
  """SIGTERM raises `Terminated` in this process (training's
  `PreemptionHook` sets its own handler while it trains). A forked child
  that inherits the handler dies of the signal as usual."""
  owner = os.getpid()

  def on_sigterm(signum, frame):
    del frame
    if os.getpid() != owner:
      signal.signal(signum, signal.SIG_DFL)
      os.kill(os.getpid(), signum)
      return
    raise Terminated()

  signal.signal(signal.SIGTERM, on_sigterm)


def run_main(main, define_flags=None):
  """Runs `main` through `absl.app.run`, reporting bad input in one line.

  A flag that does not parse, a missing required flag, or a `ValueError`,
  `OSError` or TensorFlow `NotFoundError` / `InvalidArgumentError` /
  `FailedPreconditionError` / `PermissionDeniedError` / `AlreadyExistsError`
  / `DataLossError` (with the damaged TFRecord file named) escaping `main`,
  or any write that hit a full disk or a file-size limit, is printed as
  `error: <message>` on stderr, and the process exits with status 1.
  `BERT_DEBUG=1` gives the full traceback (and TensorFlow's deprecation
  notices) instead. `--use_xla` takes effect at parsing
  (`flags_first.parse_flags`).
  Ctrl-C outside training is one line too, `error: interrupted (Ctrl-C)`,
  exit status 130; SIGTERM outside training is `error: terminated
  (SIGTERM) ...`, exit status 143, after every atomic output removed its
  temporary name. Temporary files (autograph's, Beam's) go to a folder
  the run owns (`leftovers.use_own_temp_dir`). An `--init_checkpoint`
  naming a Hugging Face folder is converted first
  (`bert_tf.convert.sources.resolve_model_flags`).

  Args:
    main: the script's `main(argv)`; `--help` lists its module's flags.
    define_flags: the script's `define_flags()`, or None where the caller
      defined them. Run as a command, the script has defined and parsed
      them already (`flags_first`); they are parsed again here.
  """
  again = define_flags is not None and quiet.is_command(main.__module__)
  if define_flags is not None and not again:
    define_flags()
  flags_first.show_in_help(main.__module__)

  def guarded(argv):
    quiet.one_log_stream()  # Each TensorFlow log line once.
    # Autograph's and Beam's temporary files in a folder of this run's.
    leftovers.use_own_temp_dir()
    if not os.environ.get("BERT_DEBUG"):
      # Deprecation notices of tf.compat.v1 APIs (a dozen lines before the
      # first line of the project's own log); BERT_DEBUG=1 shows them.
      tf_private.quiet_deprecation_notices()
    _terminate_by_exception()
    try:
      # A Hugging Face folder as --init_checkpoint: converted once (cached),
      # and the model flags the script reads point at the conversion.
      sources.resolve_model_flags(flags.FLAGS)
      return main(argv)
    except Terminated:
      if os.environ.get("BERT_DEBUG"):
        raise
      sys.stderr.write("error: terminated (SIGTERM); no partial output "
                       "was kept\n")
      sys.stderr.flush()
      sys.exit(143)
    except KeyboardInterrupt:
      # Ctrl-C outside a training loop (which saves and exits itself).
      if os.environ.get("BERT_DEBUG"):
        raise
      sys.stderr.write("error: interrupted (Ctrl-C)\n")
      sys.stderr.flush()
      sys.exit(130)
    except Exception as e:  # pylint: disable=broad-except
      if os.environ.get("BERT_DEBUG") or not _is_user_error(e):
        raise
      _fail(one_line(e))

  app.run(guarded, flags_parser=functools.partial(flags_first.parse_flags,
                                                  again=again))
