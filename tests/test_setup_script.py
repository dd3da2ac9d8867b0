"""Tests for setup.sh's choice of stack and for the pinned requirements files.

`setup.sh --print-stack` runs every check that picks the stack (the Python,
its version, the virtual environment) and installs nothing; the Pythons here
are stand-ins that only print a version, so no interpreter of each version
is needed.
"""

import os
import re
import shutil
import subprocess

import pytest

from helpers import read_lines
from helpers import REPO_ROOT

SETUP = os.path.join(REPO_ROOT, "setup.sh")
# Stack file -> (marker every line carries, Python versions it serves).
STACKS = {
    "requirements-tf2.15.txt": ('python_version < "3.12"',
                                ("3.9", "3.10", "3.11")),
    "requirements-tf2.21.txt": ('python_version >= "3.12"', ("3.12", "3.13")),
}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!]*)")


def _fake_python(folder, name, version):
  """An executable `folder/name` that prints `version` whatever it is asked."""
  os.makedirs(str(folder), exist_ok=True)
  path = os.path.join(str(folder), name)
  with open(path, "w", encoding="utf-8") as f:
    f.write("#!/bin/sh\necho %s\n" % version)
  os.chmod(path, 0o755)
  return path


def _setup(tmp_path, path=None, **env):
  """Runs `setup.sh --print-stack` with `env`; PATH `path` (default the
  caller's). Returns (exit status, stdout, stderr)."""
  full_env = dict(os.environ, VENV=str(tmp_path / "venv"))
  full_env.pop("PYTHON", None)
  if path is not None:
    full_env["PATH"] = path
  full_env.update(env)
  result = subprocess.run([shutil.which("bash"), SETUP, "--print-stack"],
                          capture_output=True, text=True, env=full_env,
                          timeout=60)
  return result.returncode, result.stdout, result.stderr


def _printed(stdout):
  return dict(field.split("=", 1) if "==" not in field else ("pin", field)
              for field in stdout.split())


def _tensorflow_pin(requirements):
  for line in read_lines(os.path.join(REPO_ROOT, requirements)):
    match = _PIN.match(line)
    if match and match.group(1) == "tensorflow":
      return match.group(0)
  raise AssertionError("no tensorflow pin in " + requirements)


@pytest.mark.parametrize("requirements", sorted(STACKS))
def test_each_python_version_gets_its_stack_and_nothing_is_installed(
    tmp_path, requirements):
  for version in STACKS[requirements][1]:
    python = _fake_python(tmp_path / "bin", "python" + version, version)
    status, stdout, stderr = _setup(tmp_path, PYTHON=python)
    assert status == 0, stderr
    assert _printed(stdout) == {
        "python": python, "version": version, "requirements": requirements,
        "pin": _tensorflow_pin(requirements), "venv": str(tmp_path / "venv")}
  assert not os.path.exists(str(tmp_path / "venv"))


@pytest.mark.parametrize("version", ["2.7", "3.8", "3.14"])
def test_a_python_outside_3_9_to_3_13_is_one_line(tmp_path, version):
  python = _fake_python(tmp_path / "bin", "python", version)
  status, stdout, stderr = _setup(tmp_path, PYTHON=python)
  assert status == 1 and stdout == ""
  assert stderr == ("error: PYTHON=%s: expected Python 3.9-3.11 (TensorFlow "
                    "2.15) or 3.12-3.13 (TensorFlow 2.21), got %s\n" %
                    (python, version))


def test_a_python_that_does_not_run_is_one_line(tmp_path):
  status, _, stderr = _setup(tmp_path, PYTHON=str(tmp_path / "no_python"))
  assert status == 1
  assert stderr.startswith("error: PYTHON=%s: " % (tmp_path / "no_python"))
  assert stderr.count("\n") == 1


def test_default_is_python3_11_then_python3(tmp_path):
  """Without PYTHON: python3.11 where there is one, else python3 (so a
  machine with only Python 3.12 gets the TensorFlow 2.21 stack)."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  for tool in ("dirname", "grep"):  # What setup.sh runs besides Python.
    os.symlink(shutil.which(tool), str(bin_dir / tool))
  _fake_python(bin_dir, "python3", "3.12")
  status, stdout, stderr = _setup(tmp_path, path=str(bin_dir))
  assert status == 0, stderr
  assert _printed(stdout)["python"] == "python3"
  assert _printed(stdout)["requirements"] == "requirements-tf2.21.txt"
  _fake_python(bin_dir, "python3.11", "3.11")
  status, stdout, stderr = _setup(tmp_path, path=str(bin_dir))
  assert status == 0, stderr
  assert _printed(stdout)["python"] == "python3.11"
  assert _printed(stdout)["requirements"] == "requirements-tf2.15.txt"


def test_an_existing_venv_of_another_python_is_one_line(tmp_path):
  venv = tmp_path / "venv"
  _fake_python(venv / "bin", "python", "3.11")
  python = _fake_python(tmp_path / "bin", "python3.12", "3.12")
  status, stdout, stderr = _setup(tmp_path, PYTHON=python)
  assert status == 1 and stdout == ""
  assert stderr == ("error: %s: holds Python 3.11, expected 3.12 (%s) "
                    "(remove %s, or set VENV to another folder)\n" %
                    (venv, python, venv))
  # The venv of the chosen Python is kept (a second run only checks).
  python = _fake_python(tmp_path / "bin", "python3.11", "3.11")
  status, stdout, stderr = _setup(tmp_path, PYTHON=python)
  assert status == 0, stderr
  assert _printed(stdout)["venv"] == str(venv)


def test_without_python_an_existing_venv_keeps_its_python(tmp_path):
  """After `PYTHON=python3.13 ./quickstart.sh`, a plain `./setup.sh --test`
  reuses .venv's Python 3.13 (it was `error: .venv: holds Python 3.13,
  expected 3.11`); PYTHON still chooses, and a broken venv is refused."""
  venv = tmp_path / "venv"
  venv_python = _fake_python(venv / "bin", "python", "3.13")
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  for tool in ("dirname", "grep"):
    os.symlink(shutil.which(tool), str(bin_dir / tool))
  _fake_python(bin_dir, "python3.11", "3.11")
  status, stdout, stderr = _setup(tmp_path, path=str(bin_dir))
  assert status == 0, stderr
  assert _printed(stdout)["python"] == venv_python
  assert _printed(stdout)["version"] == "3.13"
  assert _printed(stdout)["requirements"] == "requirements-tf2.21.txt"
  python = str(bin_dir / "python3.11")
  status, _, stderr = _setup(tmp_path, path=str(bin_dir), PYTHON=python)
  assert status == 1 and "holds Python 3.13, expected 3.11" in stderr
  os.remove(venv_python)  # A venv whose Python is gone: the default again.
  with open(venv_python, "w", encoding="utf-8") as f:
    f.write("#!/bin/sh\nexit 1\n")
  os.chmod(venv_python, 0o755)
  status, _, stderr = _setup(tmp_path, path=str(bin_dir))
  assert status == 1
  assert stderr.startswith("error: %s: holds Python (broken), expected 3.11"
                           % venv)


def test_a_venv_name_with_spaces_is_one_line(tmp_path):
  python = _fake_python(tmp_path / "bin", "python3.12", "3.12")
  status, _, stderr = _setup(tmp_path, PYTHON=python,
                             VENV=str(tmp_path / "my venv"))
  assert status == 1
  assert stderr == "error: VENV=%s: expected a folder name without spaces\n" % (
      tmp_path / "my venv")


@pytest.mark.parametrize("requirements", sorted(STACKS))
def test_each_stack_file_pins_every_package_for_its_pythons_only(
    requirements):
  marker = STACKS[requirements][0]
  names = []
  for line in read_lines(os.path.join(REPO_ROOT, requirements)):
    if not line.strip() or line.startswith("#"):
      continue
    match = _PIN.match(line)
    assert match, line
    assert line == "%s; %s" % (match.group(0), marker), line
    names.append(match.group(1).lower())
  assert len(names) == len(set(names))
  assert {"tensorflow", "numpy", "absl-py", "safetensors", "seqeval"} <= set(
      names)
  # The Estimator ships with TensorFlow 2.15 only.
  assert ("tensorflow-estimator" in names) == (requirements ==
                                                "requirements-tf2.15.txt")


def test_requirements_txt_is_both_stacks_and_test_pins_are_exact():
  lines = [line for line in read_lines(os.path.join(REPO_ROOT,
                                                    "requirements.txt"))
           if line.strip() and not line.startswith("#")]
  assert lines == ["-r " + name for name in sorted(STACKS)]
  for name in ("requirements-test.txt", "requirements-torch.txt",
               "requirements-chinese.txt"):
    for line in read_lines(os.path.join(REPO_ROOT, name)):
      if line.strip() and not line.startswith("#"):
        assert _PIN.match(line) and _PIN.match(line).group(0) == line, line


def _setup_test_pip_calls(tmp_path, torch_found, version="3.11",
                          options=("--test",)):
  """Runs `setup.sh --test` (or `options`) with a stand-in venv Python of
  `version` that logs each pip call and answers `pip show` with "not
  installed"; a pip install of torch succeeds only where `torch_found` says
  so (0: none, 1: the CPU index, 2: the second try, a local wheel). Returns
  (pip calls, stderr)."""
  venv = tmp_path / "venv"
  (venv / "bin").mkdir(parents=True)
  log = tmp_path / "pip.log"
  python = venv / "bin" / "python"
  tries = tmp_path / "tries"
  python.write_text(
      '#!/bin/sh\necho "$@" >> {log}\n'
      'case "$*" in\n'
      '  *"pip show"*) exit 1 ;;\n'
      '  *"torch=="*"+cpu"*) echo x >> {tries}; '
      '[ "$(wc -l < {tries})" -ge {found} ] && [ {found} -gt 0 ] || exit 1 ;;\n'
      'esac\necho {version}\n'.format(log=log, tries=tries, found=torch_found,
                                 version=version),
      encoding="utf-8")
  os.chmod(str(python), 0o755)
  env = dict(os.environ, VENV=str(venv))
  env.pop("PYTHON", None)
  result = subprocess.run([shutil.which("bash"), SETUP] + list(options),
                          capture_output=True, text=True, env=env, timeout=60)
  assert result.returncode == 0, result.stderr
  return [line for line in read_lines(str(log)) if " pip " in line], \
      result.stderr


def test_test_requirements_get_pytorchs_cpu_build_first(tmp_path):
  """`setup.sh --test` installs torch's CPU build from PyTorch's CPU index,
  then requirements-torch.txt (whose `torch==X` keeps `X+cpu`); PyPI's
  default wheel is the CUDA build."""
  calls, _ = _setup_test_pip_calls(tmp_path, torch_found=1)
  cpu = [i for i, line in enumerate(calls)
         if "--index-url https://download.pytorch.org/whl/cpu" in line]
  pinned = [i for i, line in enumerate(calls)
            if "-r requirements-torch.txt" in line]
  assert len(cpu) == 1 and "torch==2.13.0+cpu " in calls[cpu[0]] + " "
  assert pinned and cpu[0] < pinned[0]
  assert any("-r requirements-test.txt" in line for line in calls)


def test_torch_comes_from_a_local_cpu_wheel_where_the_cpu_index_is_unreachable(
    tmp_path):
  """With PyTorch's index unreachable, the second try asks pip's own
  configuration (a find-links folder) for the +cpu build, never PyPI's
  plain (CUDA) torch."""
  calls, stderr = _setup_test_pip_calls(tmp_path, torch_found=2)
  tries = [line for line in calls if "torch==2.13.0+cpu" in line]
  assert len(tries) == 2 and "--index-url" not in tries[1]
  assert any("-r requirements-torch.txt" in line for line in calls)
  assert "no CPU build" not in stderr


def test_without_a_cpu_build_of_torch_setup_skips_it_in_one_line(tmp_path):
  """No CPU build anywhere (CI's Python 3.12): torch is not installed (the
  CUDA build filled CI's disk), the test requirements still are, and one
  line says which tests skip and how to get them."""
  calls, stderr = _setup_test_pip_calls(tmp_path, torch_found=0)
  assert not any("-r requirements-torch.txt" in line for line in calls)
  assert not any(" torch==2.13.0 " in line + " " for line in calls)
  assert any("-r requirements-test.txt" in line for line in calls)
  lines = [line for line in stderr.splitlines() if "torch" in line]
  assert len(lines) == 1 and "will skip" in lines[0], stderr
  assert "pip install torch==2.13.0" in lines[0]


def test_kerashub_extra_comes_with_the_stacks_pins_on_tensorflow_2_21_only(
    tmp_path):
  """--test on the 2.21 stack and --kerashub install requirements-kerashub.txt
  together with the stack's pins (so pip keeps TensorFlow, numpy and
  protobuf); --test on the 2.15 stack does not (no Keras 3 there)."""
  both = "-r requirements-tf2.21.txt -r requirements-kerashub.txt"
  for options in (("--test",), ("--kerashub",)):
    calls, _ = _setup_test_pip_calls(tmp_path / options[0][2:], 1, "3.12",
                                     options)
    assert sum(both in line for line in calls) == 1, calls
  calls, _ = _setup_test_pip_calls(tmp_path / "tf215", 1, "3.11")
  assert not any("requirements-kerashub.txt" in line for line in calls)


def test_kerashub_on_the_tensorflow_2_15_stack_is_one_line(tmp_path):
  python = _fake_python(tmp_path / "bin", "python3.11", "3.11")
  env = dict(os.environ, VENV=str(tmp_path / "venv"), PYTHON=python)
  result = subprocess.run([shutil.which("bash"), SETUP, "--kerashub",
                           "--print-stack"], capture_output=True, text=True,
                          env=env, timeout=60)
  assert result.returncode == 1 and result.stdout == ""
  assert result.stderr == (
      "error: --kerashub: keras-hub needs Keras 3, which the TensorFlow 2.15 "
      "stack (Python 3.11) lacks; use Python 3.12-3.13 (PYTHON=python3.12 "
      "VENV=.venv-tf2.21 ./setup.sh --kerashub)\n")
  assert not os.path.exists(str(tmp_path / "venv"))


def test_kerashub_requirements_pin_each_package_for_tensorflow_2_21():
  names = []
  for line in read_lines(os.path.join(REPO_ROOT, "requirements-kerashub.txt")):
    if not line.strip() or line.startswith("#"):
      continue
    match = _PIN.match(line)
    assert match and line == match.group(0) + '; python_version >= "3.12"', (
        line)
    names.append(match.group(1))
  assert "keras-hub" in names


def test_onnx_extra_comes_with_the_stacks_pins_with_onnx_and_with_test(
    tmp_path):
  """--onnx and --test each install requirements-onnx.txt once, together
  with the stack's pins (alone, pip would move numpy and protobuf past
  TensorFlow 2.15's), on both stacks; a plain run does not."""
  for version, stack in (("3.11", "requirements-tf2.15.txt"),
                         ("3.12", "requirements-tf2.21.txt")):
    both = "-r %s -r requirements-onnx.txt" % stack
    for options in (("--onnx",), ("--test",)):
      calls, _ = _setup_test_pip_calls(
          tmp_path / (options[0][2:] + version), 1, version, options)
      assert sum(both in line for line in calls) == 1, calls
    calls, _ = _setup_test_pip_calls(tmp_path / ("plain" + version), 1,
                                     version, ())
    assert not any("requirements-onnx.txt" in line for line in calls)


def test_onnx_requirements_pin_each_package_for_each_stack():
  pinned = {"< \"3.12\"": set(), ">= \"3.12\"": set()}
  for line in read_lines(os.path.join(REPO_ROOT, "requirements-onnx.txt")):
    if not line.strip() or line.startswith("#"):
      continue
    match = _PIN.match(line)
    assert match, line
    marker = line[len(match.group(0)):]
    assert marker in ('; python_version < "3.12"',
                      '; python_version >= "3.12"'), line
    pinned[marker.split("python_version ")[1]].add(match.group(1))
  for names in pinned.values():
    assert names == {"tf2onnx", "onnx", "onnxruntime"}, pinned
