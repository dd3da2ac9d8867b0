"""Training: what one step computes, and what a run is made of.

The options of a run, read from the flags once (`options`, with
`optimizer_options`); the update (`update`: the optimizer and the train
op, behind the root `optimization.py`; `schedule`: the learning rate;
`optimizers`: the optimizers by name, `adamw`, `adamw_fused`, `lamb` and
their `optimizer_base`; `train_op`'s gradients, all-reduce and
conditional update; `accumulation`, `loss_scale`, `xla`); what a `model_fn`
shares and returns (`model_fn`, `spec`, `variables`); the input pipeline
(`input_fn`); `tf.distribute` (`distribute`); the hooks of a training run
(`hooks`) and the best checkpoint with early stopping (`best`). The sequence
that puts them together for every script is `bert_tf/runner/loop.py`.
"""
