"""The optimizers by name: one table behind `--optimizer`.

`REGISTRY` maps each name to its factory and a one-line summary; the flag's
values and help, the check of `OptimizerOptions.optimizer` and the train op
all read it, so a new optimizer is its module and one `register` line
(docs/layout.md, "Adding an optimizer"). `factory(learning_rate, options)`
(a float32 scalar Tensor, `OptimizerOptions`) returns a
`tf.compat.v1.train.Optimizer` whose `apply_gradients` leaves the global
step alone; `optimizer_base.PerVariableOptimizer` gives that, root-scope
slots `<var>/<suffix>` and strategy-correct updates.
"""

import collections
import contextlib
import importlib
import types

__all__ = ["Entry", "REGISTRY", "register", "registered", "build",
           "from_options"]

Entry = collections.namedtuple("Entry", ["factory", "summary"])
Entry.__doc__ = """One optimizer of the table.

Attributes:
  factory: callable (learning_rate, options) -> the optimizer.
  summary: str, one sentence for the `--optimizer` flag's help.
"""

_ENTRIES = collections.OrderedDict()
# name -> Entry, in registration order; read-only (change it by `register`).
REGISTRY = types.MappingProxyType(_ENTRIES)


def register(name, factory, summary):
  """Adds `factory` (see the module docstring) under `name` (the
  `--optimizer` value), with `summary`, one sentence for the help.

  Raises:
    ValueError: if `name` is taken or not a plain identifier.
  """
  if not name.isidentifier():
    raise ValueError("optimizer name %r: expected letters, digits and "
                     "underscores" % (name,))
  if name in _ENTRIES:
    raise ValueError("optimizer %r is registered already" % (name,))
  _ENTRIES[name] = Entry(factory, summary)


@contextlib.contextmanager
def registered(name, factory, summary):
  """`register`, undone on leaving the block (for tests and experiments)."""
  register(name, factory, summary)
  try:
    yield
  finally:
    del _ENTRIES[name]


def from_options(cls):
  """A factory building `cls(learning_rate, weight_decay_rate, beta_1,
  beta_2, epsilon, exclude_from_weight_decay)` from `OptimizerOptions`: the
  constructor of every optimizer of this package."""

  def factory(learning_rate, options):
    return cls(learning_rate=learning_rate,
               weight_decay_rate=options.weight_decay_rate,
               beta_1=options.beta_1, beta_2=options.beta_2,
               epsilon=options.epsilon,
               exclude_from_weight_decay=list(
                   options.exclude_from_weight_decay))

  return factory


def build(learning_rate, options):
  """The optimizer `options.optimizer` names, built from `options`.

  Raises:
    ValueError: if the name is not registered (one line, listing the names).
  """
  entry = _ENTRIES.get(options.optimizer)
  if entry is None:
    raise ValueError("optimizer %r: expected one of %s" %
                     (options.optimizer, ", ".join(_ENTRIES)))
  return entry.factory(learning_rate, options)


def _imported_when_built(module, class_name):
  """`from_options` of `bert_tf.train.<module>.<class_name>`, imported when
  first built: the table, and so the --optimizer flag, loads without
  TensorFlow."""

  def factory(learning_rate, options):
    cls = getattr(importlib.import_module("bert_tf.train." + module),
                  class_name)
    return from_options(cls)(learning_rate, options)

  return factory


# The table. Order is the flag's: the reference's first.
register("adamw", _imported_when_built("adamw", "AdamWeightDecayOptimizer"),
         "Adam with decoupled weight decay, no bias correction (as "
         "released).")
register("lamb", _imported_when_built("lamb", "LAMBOptimizer"),
         "layer-wise adaptive moments (You et al. 2019), for large batches.")
register("adamw_fused", _imported_when_built(
    "adamw_fused", "FusedAdamWeightDecayOptimizer"),
         "adamw's update through TensorFlow's fused Adam kernel: the same "
         "update to float32 rounding and the same checkpoint names, in "
         "about a quarter of adamw's time.")
