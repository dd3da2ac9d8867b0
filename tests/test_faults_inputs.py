"""Bad inputs found by attacking the scripts: each ends in one line naming
the file or flag, before any work, with nothing left behind.
"""

import json
import os
import pickle
import struct

import numpy as np
import pytest
from safetensors.numpy import save_file

from helpers import data_path
import convert_checkpoint


def _hf_folder(tmp_path):
  folder = tmp_path / "hf"
  folder.mkdir()
  conformance = data_path("conformance", "modeling")
  with open(os.path.join(conformance, "bert_config.json")) as f:
    config = convert_checkpoint.bert_config_to_hf_config(
        json.load(f), ["BertForPreTraining"])
  (folder / "config.json").write_text(json.dumps(config))
  with open(os.path.join(conformance, "vocab.txt"), "rb") as f:
    (folder / "vocab.txt").write_bytes(f.read())
  return folder


def _truncated(path):
  save_file({"a": np.zeros([64, 64], np.float32)}, str(path))
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])  # Offsets past the end.


def _huge_header(path):
  path.write_bytes(struct.pack("<Q", 1 << 60) + b"{}")


def _pickled(path):
  path.write_bytes(pickle.dumps({"bert.embeddings": [1.0, 2.0]}))


def _not_json(path):
  path.write_bytes(struct.pack("<Q", 5) + b"{oops")


@pytest.mark.parametrize("damage,expected", [
    (_truncated, "not a valid safetensors file"),
    (_huge_header, "not a valid safetensors file"),
    (_pickled, "not a safetensors file but a PyTorch pickle"),
    (_not_json, "not a valid safetensors file"),
])
def test_damaged_safetensors_is_one_line_naming_the_file(tmp_path, damage,
                                                         expected):
  folder = _hf_folder(tmp_path)
  weights = folder / "model.safetensors"
  damage(weights)
  with pytest.raises(ValueError) as info:
    convert_checkpoint.hf_to_tf(str(folder), str(tmp_path / "tf"))
  message = str(info.value)
  assert message.startswith(str(weights) + ": " + expected), message
  assert "\n" not in message
  assert not (tmp_path / "tf").exists()
