"""Checkpoint conversion between Hugging Face and the TF release layouts.

`config` maps `config.json` to `bert_config.json` and back, `weights` holds
the tensor name table and converts numpy arrays in memory, `files` reads and
writes safetensors, TF checkpoints and output folders, and `folders` runs the
two whole-folder conversions that `convert_checkpoint.py` exposes as flags;
`kerashub` converts KerasHub BERT presets both ways through keras-hub (an
optional extra of the TensorFlow 2.21 stack), and `keras_saved_model`
reads the SavedModel that a KerasHub backbone's `export` writes.
"""

# convert_checkpoint.py --task: the fine-tuned tasks a Hugging Face folder
# can be written for (`fine_tuned`), here so that the flag is defined
# before TensorFlow loads.
FINE_TUNED_TASKS = ("classifier", "regression", "multi_label", "ner",
                    "squad", "multiple_choice")
