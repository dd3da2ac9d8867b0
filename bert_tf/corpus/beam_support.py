"""Importing Apache Beam, reading `--pipeline_options`, atomic shard files.

Beam is an optional extra (`./setup.sh --beam`), imported only when a Beam
flag is given (missing: one line naming the flag and the install command).
Shards appear under their final names only when the whole pipeline
succeeded: the launcher holds temporary names (`atomic_outputs`), workers
write attempts renamed onto them when complete (`attempt_paths`).
"""

import contextlib
import importlib
import logging as std_logging
import os
import re
import sys
import uuid

from bert_tf import io as io_utils

__all__ = ["INSTALL_HINT", "import_module", "import_beam",
           "split_pipeline_options", "pipeline_options", "worker_pythonpath",
           "run_pipeline", "counters", "atomic_outputs", "attempt_paths"]

INSTALL_HINT = "pip install .[beam] (or ./setup.sh --beam)"

# A user error raised in a worker, as Beam's wrapped message quotes it.
_QUOTED_ERROR = re.compile(r"^(?:\w+\.)*(ValueError|OSError): (.+)$",
                           re.MULTILINE)

# What Beam appends to a worker's message.
_BEAM_STEP = re.compile(r"\s*\[while running '[^']*'\]")

# An option starts at a comma followed by "-": "--experiments=a,b" stays one.
_OPTION_START = re.compile(r",(?=\s*-)")

# Worker log levels (Beam's harness options), unless --pipeline_options
# sets them: this project's warnings, none of Beam's start-up lines.
_QUIET_WORKERS = (
    "--default_sdk_harness_log_level=WARNING",
    '--sdk_harness_log_level_overrides={"apache_beam": "ERROR", '
    '"__main__": "ERROR"}')
# The logger with which the DirectRunner relays its workers' lines.
_RELAYED_WORKER_LINES = "apache_beam.runners.portability.local_job_service"


def import_module(name, flag_name):
  """Imports module `name` of the `beam` extra (Beam's notes about missing
  Google Cloud clients silenced).

  Raises:
    ValueError: `--<flag_name>: needs <name>; install it with ...`.
  """
  disabled = std_logging.root.manager.disable
  std_logging.disable(max(disabled, std_logging.WARNING))
  try:
    return importlib.import_module(name)
  except ImportError as e:
    where = flag_name if flag_name.endswith(".py") else "--" + flag_name
    raise ValueError("%s: needs %s, which is not installed (%s); install "
                     "the extra with %s" % (where, name, e,
                                            INSTALL_HINT)) from None
  finally:
    std_logging.disable(disabled)


def import_beam(flag_name):
  """`apache_beam`, or a one-line ValueError naming `--<flag_name>`."""
  return import_module("apache_beam", flag_name)


def split_pipeline_options(text):
  """Splits `--a=1,--b=x,y` into `["--a=1", "--b=x,y"]` (a comma starts an
  option only before a `-`).

  Raises:
    ValueError: when a piece does not start with `-`.
  """
  pieces = [p.strip() for p in _OPTION_START.split(text or "") if p.strip()]
  for piece in pieces:
    if not piece.startswith("-"):
      raise ValueError("--pipeline_options: %r is not an option; expected "
                       "comma-separated Beam options such as "
                       "--runner=DirectRunner,--direct_num_workers=2" % piece)
  return pieces


def pipeline_options(text, num_workers, flag_name="pipeline_options"):
  """Beam `PipelineOptions` from the flag's `text`, with local defaults.

  None given: the DirectRunner in `num_workers` processes (at most one a
  core). Workers log warnings and errors only, Beam's own warnings not at
  all, unless the options say otherwise. Unknown options are refused.

  Raises:
    ValueError: a malformed or unknown option, or no Beam; naming
      `flag_name`.
  """
  module = import_module("apache_beam.options.pipeline_options", flag_name)
  argv = split_pipeline_options(text)
  if not argv:
    argv = ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
            "--direct_num_workers=%d" % max(1, min(num_workers,
                                                   os.cpu_count() or 1))]
  argv += [option for option in _QUIET_WORKERS
           if not any(arg.startswith(option.split("=")[0] + "=")
                      for arg in argv)]
  options = module.PipelineOptions(argv)
  unknown = _unknown_options(module, argv)
  if unknown:
    raise ValueError("--%s: unknown Beam option(s) %s" %
                     (flag_name, " ".join(unknown)))
  return options


def _unknown_options(module, argv):
  """Options in `argv` that no registered Beam options class defines (none
  known when this Beam version lacks the parser used here)."""
  # pylint: disable=protected-access
  if not hasattr(module, "_BeamArgumentParser"):
    return []
  parser = module._BeamArgumentParser(allow_abbrev=False)
  for cls in module.PipelineOptions.__subclasses__():
    cls._add_argparse_args(parser)
  # pylint: enable=protected-access
  _, unknown = parser.parse_known_args(argv)
  return [arg for arg in unknown if arg.startswith("-")]


def worker_pythonpath(*modules):
  """Adds the folders of `modules` to `PYTHONPATH`, so that DirectRunner
  workers import them by name (a script run as `python script.py` is
  `__main__` here)."""
  folders = []
  for module in modules:
    path = getattr(module, "__file__", None)
    if path:
      folder = os.path.dirname(os.path.abspath(path))
      for _ in range(module.__name__.count(".") +
                     (os.path.basename(path) == "__init__.py")):
        folder = os.path.dirname(folder)
      folders.append(folder)
  current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p]
  merged = []
  for folder in folders + current:
    if folder not in merged:
      merged.append(folder)
  os.environ["PYTHONPATH"] = os.pathsep.join(merged)
  for folder in folders:
    if folder not in sys.path:
      sys.path.append(folder)


def run_pipeline(pipeline, flag_name):
  """Runs `pipeline` to the end and returns its result, dropping the
  DirectRunner's second copy of each worker log line; a worker's
  `ValueError` or `OSError` is raised again as
  `ValueError("--<flag_name>: <message>")`."""
  std_logging.getLogger("apache_beam").setLevel(std_logging.WARNING)
  std_logging.getLogger(_RELAYED_WORKER_LINES).setLevel(std_logging.CRITICAL)
  try:
    result = pipeline.run()
    result.wait_until_finish()
  except Exception as e:  # pylint: disable=broad-except
    quoted = _QUOTED_ERROR.findall(str(e))
    if quoted:  # From a worker process.
      message = quoted[-1][1]
    elif isinstance(e, (ValueError, OSError)):  # From this process.
      message = str(e)
    else:
      raise
    message = " ".join(_BEAM_STEP.sub("", message).split())
    if not message.startswith("--"):
      message = "--%s: %s" % (flag_name, message)
    raise ValueError(message) from None
  return result


def counters(beam, result, namespace):
  """{name: committed value} of the pipeline's counters in `namespace`."""
  query = result.metrics().query(
      beam.metrics.metric.MetricsFilter().with_namespace(namespace))
  return {counter.key.metric.name: counter.committed
          for counter in query["counters"]}


@contextlib.contextmanager
def atomic_outputs(part_outputs):
  """Yields temporary names (same shape as `part_outputs`, lists of each
  shard's final paths) that become final on success; one no worker wrote
  becomes an empty file."""
  # TensorFlow's file system where it is used: the scripts define their
  # flags from this package before TensorFlow loads.
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  with contextlib.ExitStack() as outputs:
    temps = [[outputs.enter_context(io_utils.atomic_path(path))
              for path in paths] for paths in part_outputs]
    try:
      yield temps
      for paths in temps:
        for path in paths:
          if not tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path, "wb"):
              pass
    finally:
      for paths in temps:
        for path in paths:
          # Listed, not globbed: the folder's name may hold `[`, `*`, `?`.
          folder, base = os.path.split(path)
          for name in tf.io.gfile.listdir(folder or "."):
            if name.startswith(base + ".attempt-"):
              tf.io.gfile.remove(os.path.join(folder, name))


@contextlib.contextmanager
def attempt_paths(temps):
  """For a worker: yields fresh attempt names for `temps`, renamed onto
  them when the block succeeds, removed on error."""
  # TensorFlow's file system (see atomic_outputs).
  import tensorflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top
  attempt = uuid.uuid4().hex[:8]
  attempts = ["%s.attempt-%s" % (path, attempt) for path in temps]
  try:
    yield attempts
    for path, temp in zip(attempts, temps):
      tf.io.gfile.rename(path, temp, overwrite=True)
  finally:
    for path in attempts:
      if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)
