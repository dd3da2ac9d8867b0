"""The optimizers by name: one table behind `--optimizer`.

`REGISTRY` maps each name to how its optimizer is built and a one-line
summary. The `--optimizer` flag's allowed values and help
(`bert_tf/cli/flags.py`), the check of `OptimizerOptions.optimizer` and the
optimizer the train op uses (`update.build_train_step`, through
`build`) all read it, so a new optimizer is its module and one
`register` line below (docs/layout.md, "Adding an optimizer").

A registered optimizer is built by `factory(learning_rate, options)`, where
`learning_rate` is the float32 scalar Tensor of the schedule and `options`
the run's `OptimizerOptions`; it returns a `tf.compat.v1.train.Optimizer`
whose `apply_gradients(grads_and_vars, global_step=..., [aggregate_gradients=
False under a strategy])` updates the variables and leaves the global step
alone (the train op increments it). Subclassing
`optimizer_base.PerVariableOptimizer` gives that, slots named
`<var>/<suffix>` in the root scope, and correct updates under a
`tf.distribute` strategy.
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
  """Adds an optimizer to the table under `name`.

  Args:
    name: str, the `--optimizer` value (letters, digits, underscores).
    factory: callable (learning_rate, options) -> optimizer; see the module
      docstring for what the optimizer must do.
    summary: str, one sentence for the flag's help.

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
  """The optimizer that `options.optimizer` names, built from `options`.

  Args:
    learning_rate: float or float32 scalar Tensor.
    options: `OptimizerOptions`.

  Returns:
    The optimizer.

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
