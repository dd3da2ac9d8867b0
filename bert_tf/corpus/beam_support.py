"""Importing Apache Beam and reading `--pipeline_options`.

Beam is an optional extra (`pip install .[beam]`, `./setup.sh --beam`): the
scripts import it through `import_beam` only when a Beam flag is given, so a
missing install is one line naming the flag and the install command, and
runs without Beam flags pay nothing for it.
"""

import importlib
import os
import re
import sys

__all__ = ["INSTALL_HINT", "import_module", "import_beam",
           "split_pipeline_options", "pipeline_options", "worker_pythonpath"]

INSTALL_HINT = "pip install .[beam] (or ./setup.sh --beam)"

# An option starts at a comma followed by "-": "--experiments=a,b" stays one.
_OPTION_START = re.compile(r",(?=\s*-)")


def import_module(name, flag_name):
  """Imports module `name` of the `beam` extra.

  Raises:
    ValueError: `--<flag_name>: needs <name>; install it with ...` when it is
      not installed.
  """
  try:
    return importlib.import_module(name)
  except ImportError as e:
    raise ValueError("--%s: needs %s, which is not installed (%s); install "
                     "the extra with %s" % (flag_name, name, e,
                                            INSTALL_HINT)) from None


def import_beam(flag_name):
  """`apache_beam`, or a one-line ValueError naming `--<flag_name>`."""
  return import_module("apache_beam", flag_name)


def split_pipeline_options(text):
  """Splits `--a=1,--b=x,y` into `["--a=1", "--b=x,y"]`.

  A comma starts a new option only when a `-` follows it, so option values
  may hold commas (`--experiments=a,b`).

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
  """Beam `PipelineOptions` from `--pipeline_options`, with local defaults.

  With no options given, the pipeline runs on the DirectRunner in
  `num_workers` processes (`--direct_running_mode=multi_processing`).
  Options that Beam does not know are refused (a typo would otherwise run
  with defaults).

  Args:
    text: str, the flag's value.
    num_workers: int, DirectRunner processes when no options are given.
    flag_name: str, for messages.

  Returns:
    `apache_beam.options.pipeline_options.PipelineOptions`.

  Raises:
    ValueError: for a malformed or unknown option, or without Beam.
  """
  module = import_module("apache_beam.options.pipeline_options", flag_name)
  argv = split_pipeline_options(text)
  if not argv:
    argv = ["--runner=DirectRunner", "--direct_running_mode=multi_processing",
            "--direct_num_workers=%d" % num_workers]
  options = module.PipelineOptions(argv)
  unknown = _unknown_options(module, argv)
  if unknown:
    raise ValueError("--%s: unknown Beam option(s) %s" %
                     (flag_name, " ".join(unknown)))
  return options


def _unknown_options(module, argv):
  """Options in `argv` that no registered Beam options class defines."""
  parser = module._BeamArgumentParser(allow_abbrev=False)  # pylint: disable=protected-access
  for cls in module.PipelineOptions.__subclasses__():
    cls._add_argparse_args(parser)  # pylint: disable=protected-access
  _, unknown = parser.parse_known_args(argv)
  return [arg for arg in unknown if arg.startswith("-")]


def worker_pythonpath(*modules):
  """Adds the folders that hold `modules` to `PYTHONPATH` (this process's
  environment), so that DirectRunner worker processes import them by name
  as this process does (a script run as `python script.py` is `__main__`
  here and importable only from its folder).

  Args:
    modules: module objects.
  """
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
