"""Tests for bert_tf/cli: shared flags, the start-up checks, one-line errors."""

import ast
import os
import subprocess
import sys
import textwrap

from absl import flags
import pytest
import tensorflow.compat.v1 as tf

from helpers import data_path
from helpers import checked_model
from helpers import REPO_ROOT
from helpers import script_env

from bert_tf.cli import flags as cli_flags
from bert_tf.cli import entry
from bert_tf.cli import startup
from bert_tf.train import checkpoints
import modeling

# The scripts at the repository root that run through `entry.run_main`.
_SCRIPTS = ("run_pretraining", "run_classifier", "run_squad", "run_ner",
            "extract_features", "create_pretraining_data",
            "convert_checkpoint", "predict_saved_model")


def test_check_max_seq_length_names_both_numbers():
  config = modeling.BertConfig(vocab_size=10, max_position_embeddings=64)
  startup.check_max_seq_length(64, config)
  with pytest.raises(ValueError, match="--max_seq_length=65 .*=64"):
    startup.check_max_seq_length(65, config)


def test_load_bert_config_errors_name_flag_and_path(tmp_path):
  with pytest.raises(ValueError, match="--bert_config_file is required"):
    startup.load_bert_config(None)
  missing = str(tmp_path / "missing.json")
  with pytest.raises(ValueError, match="--bert_config_file: .*missing.json "
                     "does not exist"):
    startup.load_bert_config(missing)


def test_resolve_checkpoint_accepts_prefix_or_directory(tmp_path):
  with tf.Graph().as_default():
    tf.get_variable("v", shape=[2])
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      prefix = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=3)
  assert checkpoints.resolve(prefix) == prefix
  assert checkpoints.resolve(str(tmp_path)) == prefix
  with pytest.raises(ValueError, match="--init_checkpoint: no TensorFlow "
                     "checkpoint"):
    checkpoints.resolve(str(tmp_path / "nope.ckpt"))
  with pytest.raises(ValueError, match="--init_checkpoint: no TensorFlow"):
    checkpoints.resolve(None)


def _run_script(tmp_path, body, args=(), env=None):
  """Runs `body` (Python source) as a script with the repo on sys.path."""
  script = tmp_path / "script.py"
  script.write_text("import sys\nsys.path.insert(0, %r)\n" % REPO_ROOT +
                    textwrap.dedent(body))
  return subprocess.run([sys.executable, str(script)] + list(args),
                        capture_output=True, text=True,
                        env=script_env() if env is None else env,
                        timeout=120)


@pytest.mark.slow
def test_run_main_prints_bad_input_as_one_line(tmp_path):
  result = _run_script(tmp_path, """
      from bert_tf.cli import entry
      def main(_):
        raise ValueError("--input_file: 'x' matched\\nno files")
      entry.run_main(main)
  """)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1] == (
      "error: --input_file: 'x' matched no files")
  assert "Traceback" not in result.stderr


class _Vocab(object):

  def __init__(self, size):
    self.vocab = dict.fromkeys(range(size))


def test_check_vocab_size_refuses_ids_past_the_embeddings():
  config = modeling.BertConfig(vocab_size=1000)
  startup.check_vocab_size(_Vocab(1000), config)
  with pytest.raises(ValueError, match="--vocab_file has 1001 tokens but the "
                     "model's vocab_size is 1000"):
    startup.check_vocab_size(_Vocab(1001), config)


def test_graph_execution_errors_are_cut_to_their_message():
  error = tf.errors.InvalidArgumentError(
      None, None, "Graph execution error:\n\nDetected at node 'x' defined at "
      "(most recent call last):\n  File \"a.py\", line 1\n    f()\n"
      "indices[1] = 1103 is not in [0, 1000)\n\t [[{{node x}}]]")
  assert entry.one_line(error) == (
      "indices[1] = 1103 is not in [0, 1000)")
  assert entry.one_line(ValueError("a\nb")) == "a b"


def _save_checkpoint(path, global_step=None):
  with tf.Graph().as_default():
    tf.get_variable("bert/v", shape=[2])
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return saver.save(sess, path, global_step=global_step)


def test_resolve_init_checkpoint_takes_a_released_model_folder(tmp_path):
  released = tmp_path / "uncased_L-2_H-128_A-2"
  released.mkdir()
  prefix = _save_checkpoint(str(released / "bert_model.ckpt"))
  assert checkpoints.resolve(str(released)) == prefix
  assert checkpoints.resolve(prefix + ".index") == prefix


def test_prepare_model_reports_every_problem_together(tmp_path):
  shared_model = data_path("conformance", "modeling")
  config = os.path.join(shared_model, "bert_config.json")
  with pytest.raises(ValueError) as info:
    checked_model(
        config, max_seq_length=1000,
        init_checkpoint="/models/cased_L-12_H-768_A-12/bert_model.ckpt",
        do_lower_case=True, vocab_file=str(tmp_path), output_dir=None,
        problems=["--doc_stride=0: expected at least 1 token"])
  message = str(info.value)
  for part in ("--doc_stride=0", "--max_seq_length=1000 is longer",
               "--init_checkpoint: no TensorFlow checkpoint",
               "--do_lower_case=True does not match",
               "--vocab_file: %s is a directory" % tmp_path,
               "--output_dir is required"):
    assert part in message, part
  assert "\n" not in message


def test_prepare_model_returns_config_checkpoint_and_tokenizer(tmp_path):
  model_dir = data_path("conformance", "modeling")
  model = checked_model(
      os.path.join(model_dir, "bert_config.json"), 64, model_dir, True,
      os.path.join(model_dir, "vocab.txt"), str(tmp_path / "out"))
  assert model.bert_config.max_position_embeddings == 64
  assert model.init_checkpoint == os.path.join(model_dir, "bert_model.ckpt")
  assert model.tokenizer.tokenize("hello")
  assert not os.path.exists(tmp_path / "out")


def test_vocab_errors_have_one_wording(tmp_path):
  with pytest.raises(ValueError, match="--vocab_file: .*nope.txt does not "
                     "exist"):
    startup.load_tokenizer(str(tmp_path / "nope.txt"), True)
  with pytest.raises(ValueError, match="--vocab_file is required"):
    startup.load_tokenizer("", True)


def test_shared_flags_are_defined_once():
  values = flags.FlagValues()
  for name in ("do_train", "max_seq_length"):
    define, default, help_text = cli_flags.SHARED_FLAGS[name]
    define(name, default, help_text, flag_values=values)
  with pytest.raises(flags.DuplicateFlagError):
    cli_flags.SHARED_FLAGS["do_train"][0]("do_train", False, "again",
                                          flag_values=values)
  with pytest.raises(KeyError, match="not defined here"):
    cli_flags.define_flags("do_train", max_seq_length=384)


@pytest.mark.slow
def test_flag_parsing_errors_are_one_line(tmp_path):
  for args, want in ((["--need=x", "--kind=c"], "--kind"),
                     ([], "--need")):
    result = _run_script(tmp_path, """
        from absl import flags
        from bert_tf.cli import entry
        flags.DEFINE_enum("kind", "a", ["a", "b"], "a kind")
        flags.DEFINE_string("need", None, "needed")
        flags.mark_flag_as_required("need")
        entry.run_main(lambda _: None)
    """, args)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and want in last, result.stderr
    assert "FATAL" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_use_xla_clusters_cpu_ops_in_main(tmp_path):
  # `import tensorflow` makes absl list the devices right after the flags
  # are parsed, and TensorFlow reads TF_XLA_FLAGS only then: run_main must
  # set it before (setting it in main compiled nothing).
  env = script_env(CUDA_VISIBLE_DEVICES="")
  env.pop("TF_XLA_FLAGS", None)
  result = _run_script(tmp_path, """
      from absl import flags
      import tensorflow.compat.v1 as tf
      from bert_tf.cli import flags as cli_flags
      from bert_tf.cli import entry
      from bert_tf.checks.problems import Problems
      from bert_tf.train import options as training_options

      def main(_):
        session_config, _ = training_options.session_settings(
            training_options.from_flags(flags.FLAGS, Problems()).training)
        with tf.Graph().as_default():
          x = tf.random.normal([32, 32])
          y = tf.nn.relu(tf.matmul(x, x) + 1.0) * 2.0
          with tf.Session(config=session_config) as sess:
            metadata = tf.RunMetadata()
            sess.run(y, options=tf.RunOptions(output_partition_graphs=True),
                     run_metadata=metadata)
        print(" ".join(sorted({node.op for graph in metadata.partition_graphs
                               for node in graph.node if "Xla" in node.op})))

      cli_flags.define_flags("use_xla")
      entry.run_main(main)
  """, ["--use_xla"], env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert {"_XlaCompile", "_XlaRun"} <= set(result.stdout.split())


def test_every_script_quiets_tensorflow_first_when_run_as_a_command():
  # TensorFlow reads its C++ log level once, at import: the scripts' first
  # statements quiet it, before any import that may load TensorFlow.
  for script in _SCRIPTS:
    with open(os.path.join(REPO_ROOT, script + ".py"), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    body = [node for node in tree.body
            if not (isinstance(node, ast.Expr) and
                    isinstance(node.value, ast.Constant))]
    assert [ast.unparse(node) for node in body[:2]] == [
        "from bert_tf.cli import quiet",
        "quiet.when_run_as_command(__name__)"], script


def _python(code):
  env = script_env()
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  return result


def test_importing_the_package_and_reference_modules_changes_nothing():
  # bert_tf and tokenization do not import TensorFlow: nothing changes.
  _python("import os, sys; e = dict(os.environ); m = list(sys.meta_path); "
          "import bert_tf, bert_tf.cli, bert_tf.corpus, tokenization; "
          "assert dict(os.environ) == e and list(sys.meta_path) == m; "
          "assert 'tensorflow' not in sys.modules")
  # modeling and optimization need TensorFlow, whose own import sets
  # variables (TF2_BEHAVIOR, ...) and import hooks: after it, they and the
  # package's training and command-line modules change nothing either.
  # (The scripts import seqeval, whose scikit-learn sets KMP_* variables.)
  _python("import os, sys, logging; import tensorflow; "
          "e = dict(os.environ); m = list(sys.meta_path); "
          "levels = (logging.getLogger().level, "
          "logging.getLogger('tensorflow').level); "
          "import bert_tf, modeling, tokenization, optimization; "
          "from bert_tf.runner import loop; "
          "from bert_tf.cli import entry, startup; "
          "assert dict(os.environ) == e and list(sys.meta_path) == m; "
          "assert levels == (logging.getLogger().level, "
          "logging.getLogger('tensorflow').level)")


def test_a_command_quiets_tensorflow_before_it_loads():
  # As `python run_classifier.py` or `bert-run-classifier` runs it: the level
  # is set and TensorFlow's import prints nothing (2.19+ prints some lines
  # that no level stops: that import runs with stderr on /dev/null).
  result = _python(
      "import os, sys; from bert_tf.cli import quiet; "
      "sys.argv[0] = 'pytest'; assert not quiet.when_run_as_command("
      "'run_classifier'); assert 'TF_CPP_MIN_LOG_LEVEL' not in os.environ; "
      "sys.argv[0] = '/venv/bin/bert-run-classifier'; "
      "assert quiet.when_run_as_command('run_classifier'); "
      "print(os.environ['TF_CPP_MIN_LOG_LEVEL']); import tensorflow")
  assert result.stdout.split() == ["3"] and result.stderr == "", (
      result.stderr[-2000:])


def test_a_beam_worker_quiets_tensorflow_before_it_loads():
  # A Beam worker runs Beam's harness as __main__ and imports bert_tf.corpus
  # to run a step: TensorFlow's import there printed its start-up lines
  # (on 2.21 whatever the level; on 2.15 without TF_CPP_MIN_LOG_LEVEL).
  result = _python(
      "import sys, types; sys.modules['__main__'].__spec__ = "
      "types.SimpleNamespace(name='apache_beam.runners.worker."
      "sdk_worker_main'); import bert_tf.corpus; import tensorflow")
  assert result.stderr == "", result.stderr[-2000:]


def test_console_command_help_lists_the_scripts_flags(tmp_path):
  # An installed command imports the script as a module and calls cli(), as
  # pip's wrapper does: absl lists the flags of the module named
  # sys.argv[0], so without flags_first.show_in_help none of the script's
  # showed. Answered before TensorFlow loads: quick, so not marked slow.
  command = tmp_path / "bert-run-classifier"
  command.write_text(textwrap.dedent("""
      import sys
      sys.path.insert(0, %r)
      from run_classifier import cli
      if __name__ == "__main__":
        sys.exit(cli())
  """ % REPO_ROOT))
  result = subprocess.run([sys.executable, str(command), "--help"],
                          capture_output=True, text=True, env=script_env(),
                          cwd=str(tmp_path), timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]  # absl's, after help.
  for flag in ("--task_name", "--data_dir", "--precision",
               "--distribution_strategy", "--text_a_column"):
    assert flag + ":" in result.stdout, flag
  assert "Fine-tunes BERT" in result.stdout  # The script's docstring.
