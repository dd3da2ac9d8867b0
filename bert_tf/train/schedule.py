"""The learning-rate schedule, written once: the reference's (linear warmup,
then polynomial decay to 0) evaluated on a Tensor (the train op's rate) or
a Python number (a message's), so the two cannot drift apart."""

import numbers

import tensorflow.compat.v1 as tf

__all__ = ["learning_rate"]


class _PythonMath:
  """The few operations the formula needs, on Python numbers."""

  @staticmethod
  def to_float(value):
    return float(value)

  minimum = staticmethod(min)

  @staticmethod
  def power(base, exponent):
    return base ** exponent

  @staticmethod
  def less(a, b):
    return a < b


class _TensorMath:
  """The same operations as TensorFlow ops, in float32 (the reference's
  `tf.train.polynomial_decay` and warmup ops, in the same order, so the
  float32 rates are bit-identical to the reference's)."""

  @staticmethod
  def to_float(value):
    return tf.cast(value, tf.float32)

  minimum = staticmethod(tf.minimum)
  power = staticmethod(tf.pow)
  less = staticmethod(tf.less)


def learning_rate(step, init_lr, num_train_steps, num_warmup_steps,
                  power=1.0):
  """The learning rate of the update made at global step `step`.

      decayed = init_lr * (1 - min(step, num_train_steps) / num_train_steps)
                ** power
      warmup  = init_lr * step / num_warmup_steps
      rate    = (1 - is_warmup) * decayed + is_warmup * warmup,
                is_warmup = 1.0 if step < num_warmup_steps else 0.0

  (Devlin et al. 2018, A.2; `power` is `--poly_power`.) Kept for parity:
  step 0 has rate 0.0 with warmup, and the rate drops from the warmup line
  onto the decay curve. `step`: the update count before its increment, a
  Tensor/Variable (returns a float32 scalar Tensor) or a number (returns a
  float).
  """
  if isinstance(step, numbers.Number):
    math = _PythonMath
  else:
    math = _TensorMath
    step = tf.cast(step, tf.int32)  # The reference's int32 comparison.
  step_float = math.to_float(step)
  total = math.to_float(num_train_steps)
  done = math.minimum(step_float, total) / total
  decayed = init_lr * math.power(1.0 - done, math.to_float(power))
  if not num_warmup_steps:
    return decayed
  warmup = init_lr * (step_float / math.to_float(num_warmup_steps))
  is_warmup = math.to_float(math.less(step, num_warmup_steps))
  return (1.0 - is_warmup) * decayed + is_warmup * warmup
