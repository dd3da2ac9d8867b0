"""Weights of transformers 4.x's TensorFlow BERT classes (`TFBert*`):
`tf_model.h5` (read with h5py) or a `"format": "tf"` safetensors, renamed
to the PyTorch classes' names (`weights.tensor_table`): the scope and `:0`
dropped, `layer_._N` -> `layer.N`, `mlm___cls`/`nsp___cls` -> `cls`, `/` ->
`.`, `kernel` -> `weight` transposed, `gamma`/`beta` -> `weight`/`bias`, the
position and token-type `embeddings` -> `weight`."""

import re

import h5py
import numpy as np

__all__ = ["H5_FILE", "is_keras_name", "keras_to_hf_names", "read_h5"]

H5_FILE = "tf_model.h5"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_LAST = {"gamma": "weight", "beta": "bias", "embeddings": "weight"}


def is_keras_name(name):
  """Whether a tensor name is a Keras one (`/`-separated)."""
  return "/" in name


def _hf_name(name):
  """(PyTorch-class name, transpose) of a Keras weight name."""
  parts = name[:-2].split("/") if name.endswith(":0") else name.split("/")
  if len(parts) > 1 and parts[1] in ("bert", "classifier", "qa_outputs",
                                     "mlm___cls", "nsp___cls"):
    parts = parts[1:]  # The model's scope.
  parts = [{"mlm___cls": "cls", "nsp___cls": "cls"}.get(part, part)
           for part in parts]
  transpose = parts[-1] == "kernel"
  parts[-1] = "weight" if transpose else _LAST.get(parts[-1], parts[-1])
  joined = ".".join(parts)
  return re.sub(r"\blayer_\._(\d+)\b", r"layer.\1", joined), transpose


def keras_to_hf_names(tensors, source):
  """Keras name -> array renamed (and transposed) to the PyTorch classes'.

  Raises:
    ValueError: two weights mapping to one name, naming `source`.
  """
  renamed = {}
  for name, value in tensors.items():
    new, transpose = _hf_name(name)
    if new in renamed:
      raise ValueError("%s: weights %r and another both become %r" %
                       (source, name, new))
    renamed[new] = np.ascontiguousarray(value.T) if (
        transpose and value.ndim == 2) else value
  return renamed


def read_h5(path):
  """The weights of a `tf_model.h5`, renamed as `keras_to_hf_names` does.

  Raises:
    ValueError: not an HDF5 file, or a damaged one, naming the file.
  """
  with open(path, "rb") as f:
    if f.read(8) != _HDF5_SIGNATURE:
      raise ValueError("%s: not an HDF5 file (expected Keras weights that "
                       "TFBert*.save_pretrained wrote)" % path)
  tensors = {}
  try:
    with h5py.File(path, "r") as f:
      def visit(name, item):
        if isinstance(item, h5py.Dataset):
          tensors[name.split("/", 1)[1] if "/" in name else name] = item[()]
      f.visititems(visit)
  except (OSError, KeyError, ValueError) as e:
    raise ValueError("%s: not a readable HDF5 file (%s)" %
                     (path, " ".join(str(e).split()))) from None
  return keras_to_hf_names(tensors, path)
