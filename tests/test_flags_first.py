"""Every script answers `--help`, `--helpfull` and flag errors before
TensorFlow loads (`bert_tf/cli/flags_first.py`).

Each case runs the script as a command in a subprocess whose exit hook
reports whether `tensorflow` was in `sys.modules` when the process ended,
after the script printed its answer; the answer itself is checked too.
"""

import os
import subprocess
import sys

import pytest

from helpers import REPO_ROOT
from helpers import script_env

# Runs a script as `__main__` (as `python <script>.py` does) and, at exit,
# prints on stderr whether TensorFlow had been imported.
_RUN = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write(
    "tensorflow imported: %s\\n" % ("tensorflow" in sys.modules)))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

_SCRIPTS = ("create_pretraining_data", "run_pretraining", "run_classifier",
            "run_squad", "extract_features", "run_ner", "run_multiple_choice",
            "convert_checkpoint", "predict_saved_model", "prepare_corpus",
            "learn_vocab", "predict_masked_lm")

# (script, arguments) -> what the answer must contain (stdout + stderr).
_CASES = dict(
    [((name, ("--no_such_flag=1",)),
      "error: Unknown command line flag 'no_such_flag' (see --helpfull)")
     for name in _SCRIPTS] + [
         (("run_classifier", ("--help",)), "--task_name:"),
         (("run_classifier", ("--helpfull",)), "--distribution_strategy:"),
         (("run_classifier", ("--task_name=mrpc",)),
          "Flag --data_dir must have a value other than None"),
         (("run_classifier", ("--task_name=mrpc", "--data_dir=d",
                              "--output_dir=o", "--precision=fp8")),
          "flag --precision=fp8: value should be one of <fp32|bf16|fp16>"),
         (("run_squad", ("--max_seq_length=many",)),
          "error: flag --max_seq_length=many"),
     ])


@pytest.fixture(scope="module")
def answers():
  """(script, arguments) -> (exit status, stdout + stderr), all run at once."""
  env = script_env(PYTHONPATH=REPO_ROOT)
  started = {case: subprocess.Popen(
      [sys.executable, "-c", _RUN, os.path.join(REPO_ROOT, case[0] + ".py")]
      + list(case[1]), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for case in _CASES}
  done = {}
  for case, proc in started.items():
    stdout, stderr = proc.communicate(timeout=300)
    done[case] = (proc.returncode, stdout + stderr)
  return done


@pytest.mark.parametrize("case", list(_CASES),
                         ids=lambda case: " ".join((case[0],) + case[1]))
def test_answer_comes_before_tensorflow_loads(answers, case):
  status, output = answers[case]
  assert status == 1, output[-2000:]  # absl's status after help, too.
  assert _CASES[case] in output, output[-2000:]
  assert "Traceback" not in output, output[-2000:]
  assert output.rstrip().endswith("tensorflow imported: False"), (
      output[-2000:])
