"""What a fine-tuned model's Hugging Face folder carries besides weights:
the task's class in `architectures`, `id2label`/`label2id`, `problem_type`,
the tokenizer's settings and a model card (`README.md`).

The task and labels come from, first found first: `--task`/`--labels`; an
export (`--export`: its `serving_config.json`); the run's label files
(`classifier_labels.json`, `label_list.txt`); the heads alone (one output:
regression, else labels `LABEL_<i>`). The card's results are the
checkpoint folder's `eval_results.txt` (or `.json`).
"""

import dataclasses
import json
import os
from typing import Optional, Tuple

import tensorflow.compat.v1 as tf

from bert_tf import convert as convert_package
from bert_tf import json_file
from bert_tf.export import saved_model as export_utils
from bert_tf.export import serving
from bert_tf.tasks.classifier import multi_label as multi_label_lib
from bert_tf.tasks.ner import reader as ner_reader
from bert_tf.train import checkpoints

__all__ = ["TASKS", "TaskInfo", "read_export", "task_info",
           "apply_to_hf_config", "recorded_base_model", "read_eval_results",
           "model_card"]

# The tasks `--task` names, and the head each needs.
TASKS = convert_package.FINE_TUNED_TASKS
_HEAD_OF_TASK = {"classifier": "classifier", "regression": "classifier",
                 "multi_label": "classifier", "ner": "ner",
                 "squad": "squad", "multiple_choice": "multiple_choice"}
_HEAD_NAMES = {"classifier": "classifier head (output_weights, output_bias)",
               "ner": "token-classification head (cls/ner/*)",
               "squad": "SQuAD head (cls/squad/*)",
               "multiple_choice": "multiple-choice head "
                                  "(cls/multiple_choice/*)"}
_ARCHITECTURE = {"classifier": "BertForSequenceClassification",
                 "regression": "BertForSequenceClassification",
                 "multi_label": "BertForSequenceClassification",
                 "ner": "BertForTokenClassification",
                 "squad": "BertForQuestionAnswering",
                 "multiple_choice": "BertForMultipleChoice"}
_PROBLEM_TYPE = {"classifier": "single_label_classification",
                 "regression": "regression",
                 "multi_label": multi_label_lib.PROBLEM_TYPE}
_PIPELINE = {"classifier": "text-classification",
             "regression": "text-classification",
             "multi_label": "text-classification",
             "ner": "token-classification", "squad": "question-answering",
             "multiple_choice": None}
_AUTO_CLASS = {"classifier": "AutoModelForSequenceClassification",
               "regression": "AutoModelForSequenceClassification",
               "multi_label": "AutoModelForSequenceClassification",
               "ner": "AutoModelForTokenClassification",
               "squad": "AutoModelForQuestionAnswering",
               "multiple_choice": "AutoModelForMultipleChoice"}
_DESCRIPTION = {"classifier": "single-label sequence classification",
                "regression": "sequence regression (one score)",
                "multi_label": "multi-label sequence classification (one "
                               "sigmoid per label)",
                "ner": "token classification (named entities)",
                "squad": "extractive question answering (SQuAD)",
                "multiple_choice": "multiple choice (a context and N "
                                   "endings; SWAG)"}


@dataclasses.dataclass
class TaskInfo:
  """The task of a fine-tuned checkpoint: `task` (one of `TASKS`, or None),
  `labels` (tuple in id order, or None), `found_in` (for the card), the
  export's `serving_config.json` and version folder (or None)."""

  task: Optional[str] = None
  labels: Optional[Tuple[str, ...]] = None
  found_in: str = "the checkpoint's heads"
  export: Optional[dict] = None
  export_dir: Optional[str] = None


def read_export(path):
  """(version folder, serving config) of an `--export_dir` (its newest
  version) or a version folder.

  Raises:
    ValueError: one line naming `--export` and the path: no export, or a
      `serving_config.json` of the wrong shape.
  """
  if not tf.io.gfile.isdir(path):
    raise ValueError("--export: %s is not a folder (expected an "
                     "--export_dir or one of its version folders)" % path)
  version = path
  if not tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
    numbers = sorted(int(name.rstrip("/")) for name in
                     tf.io.gfile.listdir(path) if name.rstrip("/").isdigit())
    if not numbers:
      raise ValueError("--export: %s holds no saved_model.pb and no "
                       "numbered version folder" % path)
    version = os.path.join(path, str(numbers[-1]))
  config_path = os.path.join(version, export_utils.ASSETS_DIR,
                             export_utils.SERVING_ASSET)
  if not tf.io.gfile.exists(config_path):
    raise ValueError("--export: %s not found (expected an export written "
                     "with --export_dir)" % config_path)
  config = json_file.load(config_path, max_bytes=2 ** 24)
  serving.check_serving_config(config, config_path)
  return version, config


def _export_task(config):
  kind = config["kind"]
  if kind == export_utils.CLASSIFIER and (
      config.get("problem_type") == multi_label_lib.PROBLEM_TYPE):
    return "multi_label"
  return {export_utils.CLASSIFIER: "classifier",
          export_utils.REGRESSION: "regression", export_utils.SQUAD: "squad",
          export_utils.NER: "ner"}[kind]


def _read_label_list(path):
  with tf.io.gfile.GFile(path, "r") as f:
    return tuple(line.rstrip("\r\n") for line in f if line.strip())


def task_info(groups, num_labels, folder, task=None, labels=None,
              export=None):
  """The `TaskInfo` of a checkpoint (found as the module docstring says)
  from its tensor `groups`, the head's `num_labels`, its `folder`, and the
  optional `task`, `labels` and `export` folder.

  Raises:
    ValueError: one line: a task whose head the checkpoint lacks, a
      regression head with more than one output, or a number of labels
      other than the head's, naming the flag or file they came from.
  """
  info = TaskInfo()
  if export:
    info.export_dir, info.export = read_export(export)
  heads = sorted(groups & set(_HEAD_NAMES))
  if task is not None:
    info.task, info.found_in = task, "--task"
  elif info.export is not None:
    info.task = _export_task(info.export)
    info.found_in = "the export %s" % info.export_dir
  if labels is not None:
    info.labels, label_source = tuple(labels), "--labels"
  elif info.export is not None and info.export.get("label_list"):
    info.labels = tuple(info.export["label_list"])
    label_source = "--export: %s" % info.export_dir
  else:
    info.labels, label_source = _labels_beside(info, groups, folder)
  if info.task is None:
    info.task = ("multiple_choice" if "multiple_choice" in groups else
                 "squad" if "squad" in groups else "ner" if "ner" in groups
                 else "regression" if num_labels == 1 else
                 "classifier" if "classifier" in groups else None)
  if info.task is None:
    return info
  head = _HEAD_OF_TASK[info.task]
  if head not in groups:
    raise ValueError("%s: the task is %s but the checkpoint has no %s (its "
                     "heads: %s)" % (info.found_in, info.task,
                                     _HEAD_NAMES[head],
                                     ", ".join(heads) or "none"))
  if info.task == "regression" and num_labels != 1:
    raise ValueError("%s: the task is regression but the classifier head "
                     "has %d outputs, expected 1" % (info.found_in,
                                                     num_labels))
  if info.task in ("regression", "squad", "multiple_choice"):
    info.labels = None
  elif info.labels is not None and len(info.labels) != num_labels:
    raise ValueError("%s: %d labels, but the %s has %d outputs" %
                     (label_source, len(info.labels), _HEAD_NAMES[head],
                      num_labels))
  return info


def _labels_beside(info, groups, folder):
  """(labels, source) from the run's label files beside the checkpoint."""
  path = os.path.join(folder, multi_label_lib.LABELS_FILE)
  if "classifier" in groups and info.task in (None, "multi_label"):
    found = multi_label_lib.read_labels_file(folder)
    if found is not None:
      if info.task is None:
        info.task, info.found_in = "multi_label", path
      return tuple(found[1]), path
  path = os.path.join(folder, ner_reader.LABEL_LIST_FILE)
  if "ner" in groups and tf.io.gfile.exists(path):
    return _read_label_list(path), path
  return None, None


def apply_to_hf_config(hf_config, info, num_labels):
  """Writes the task's class, labels and problem type into a config.json
  dict (changed in place)."""
  if info.task is None:
    return
  hf_config["architectures"] = [_ARCHITECTURE[info.task]]
  if info.task in ("squad", "multiple_choice"):
    return
  labels = info.labels or tuple("LABEL_%d" % i for i in range(num_labels))
  hf_config["id2label"] = {str(i): label for i, label in enumerate(labels)}
  hf_config["label2id"] = {label: i for i, label in enumerate(labels)}
  if info.task in _PROBLEM_TYPE:
    hf_config["problem_type"] = _PROBLEM_TYPE[info.task]


def recorded_base_model(folder):
  """The `--init_checkpoint` that the training run in `folder` recorded
  (`checkpoints.INIT_RECORD`), or None. The cached conversion of a Hugging
  Face or KerasHub folder is named by that folder (its `source.json`).

  Raises:
    ValueError: a record that is not such JSON, naming the file.
  """
  path = os.path.join(folder, checkpoints.INIT_RECORD)
  if not tf.io.gfile.exists(path):
    return None
  base = json_file.field(json_file.load(path, max_bytes=2 ** 16),
                         "init_checkpoint", "string", path)
  source = os.path.join(base, "source.json")
  if os.path.isfile(source):
    return json_file.field(json_file.load(source, max_bytes=2 ** 20),
                           "folder", "string", source)
  return base


def read_eval_results(folder):
  """[(key, value str)] of `eval_results.txt` (and SQuAD's
  `eval_results.json`) in `folder`; empty when there are none."""
  results = []
  path = os.path.join(folder, "eval_results.txt")
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path, "r") as f:
      for line in f:
        key, sep, value = line.strip().partition(" = ")
        if sep:
          results.append((key, value))
  path = os.path.join(folder, "eval_results.json")
  if tf.io.gfile.exists(path):
    content = json_file.load(path, max_bytes=2 ** 20)
    if isinstance(content, dict):
      results += [(str(key), json.dumps(value))
                  for key, value in sorted(content.items())
                  if isinstance(value, (int, float, str))]
  return results


def _usage(info):
  """A Python snippet that uses the converted folder."""
  auto = _AUTO_CLASS.get(info.task, "AutoModel")
  lines = ["from transformers import AutoTokenizer, %s" % auto, "",
           "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")",
           "model = %s.from_pretrained(\"path/to/this/folder\")" % auto]
  if info.task == "squad":
    lines += ["inputs = tokenizer(\"Who wrote it?\", \"It was written by "
              "Ann.\", return_tensors=\"pt\")",
              "outputs = model(**inputs)  # start_logits, end_logits"]
  elif info.task == "ner":
    lines += ["inputs = tokenizer(\"Ann lives in Paris\", "
              "return_tensors=\"pt\")",
              "tags = model(**inputs).logits.argmax(-1)[0]",
              "print([model.config.id2label[int(t)] for t in tags])"]
  elif info.task is not None:
    activation = {"multi_label": "sigmoid()", "regression": "squeeze(-1)"}
    lines += ["inputs = tokenizer(\"first text\", \"optional second text\", "
              "return_tensors=\"pt\")",
              "logits = model(**inputs).logits",
              "print(logits.%s)" % activation.get(info.task,
                                                   "softmax(-1)")]
  return "\n".join(lines)


def model_card(info, hf_config, bert_config, checkpoint, do_lower_case,
               eval_results, base_model=None, dataset=None):
  """The model card (`README.md`): Markdown with a YAML header (library,
  pipeline tag, base model), from the `TaskInfo`, both configs, the
  checkpoint, casing, `eval_results` ([(key, value str)]), `base_model` and
  `dataset` (or None)."""
  header = ["---", "library_name: transformers", "tags:", "- bert",
            "- bert-tf"]
  if _PIPELINE.get(info.task):  # transformers has no multiple-choice one.
    header.append("pipeline_tag: %s" % _PIPELINE[info.task])
  if base_model:
    header.append("base_model: %s" % json.dumps(base_model))
  header.append("---")
  settings = dict((info.export or {}))
  data = dataset or settings.get("task_name")
  lines = header + [
      "", "# %s" % os.path.basename(os.path.dirname(checkpoint) or
                                    checkpoint), "",
      "A BERT model (%d layers, hidden size %d, %d attention heads) %s, "
      "converted from the TensorFlow checkpoint `%s` by bert-tf's "
      "`convert_checkpoint.py`." % (
          bert_config["num_hidden_layers"], bert_config["hidden_size"],
          bert_config["num_attention_heads"],
          "fine-tuned for %s" % _DESCRIPTION[info.task] if info.task
          else "in the pre-training layout", checkpoint), "",
      "- Class: `%s`" % hf_config["architectures"][0],
      "- Base checkpoint: %s" % (base_model or "not recorded (pass "
                                 "--base_model to name it)"),
      "- Training data: %s" % (data or "not recorded (pass --dataset to "
                               "name it)"),
      "- Tokenizer: WordPiece, %d tokens, `do_lower_case=%s`" % (
          bert_config["vocab_size"], bool(do_lower_case)),
  ]
  if info.task is not None:
    lines.append("- Task and labels from: %s" % info.found_in)
  if info.labels:
    lines.append("- Labels (id order): %s" % ", ".join(
        "`%s`" % label for label in info.labels))
  flags = [(key, settings[key]) for key in
           ("max_seq_length", "doc_stride", "max_query_length",
            "version_2_with_negative", "multi_label_threshold",
            "do_lower_case") if key in settings]
  if flags:
    lines += ["", "## Settings of the run (its export)", "",
              "| flag | value |", "|---|---|"]
    lines += ["| `--%s` | `%s` |" % (key, json.dumps(value))
              for key, value in flags]
  if eval_results:
    lines += ["", "## Evaluation results", "",
              "Read from the run's `eval_results.txt` beside the checkpoint.",
              "", "| metric | value |", "|---|---|"]
    lines += ["| %s | %s |" % (key, value) for key, value in eval_results]
  lines += ["", "## How to use", "", "```python", _usage(info), "```", ""]
  return "\n".join(lines)
