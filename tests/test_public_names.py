"""The reference's public names of the eight reference files stay importable.

People import the reference's modules and scripts as libraries
(`import run_classifier; run_classifier.model_fn_builder(...)`). The names
and leading parameters below are the contract's (SPEC sections 2, 3, 4 and
7); an implementation may live anywhere in the package as long as these
imports keep working, with parameters added after the listed ones only with
a default.
"""

import importlib
import inspect

import pytest

# module -> {public name: its leading parameters (None: not checked)}.
_PUBLIC = {
    "tokenization": {
        "FullTokenizer": ["vocab_file", "do_lower_case"],
        "BasicTokenizer": ["do_lower_case"],
        "WordpieceTokenizer": ["vocab", "unk_token",
                               "max_input_chars_per_word"],
        "load_vocab": ["vocab_file"],
        "convert_by_vocab": ["vocab", "items"],
        "convert_tokens_to_ids": ["vocab", "tokens"],
        "convert_ids_to_tokens": ["inv_vocab", "ids"],
        "whitespace_tokenize": ["text"],
        "convert_to_unicode": ["text"],
        "printable_text": ["text"],
        "validate_case_matches_checkpoint": ["do_lower_case",
                                             "init_checkpoint"],
    },
    "modeling": {
        "BertConfig": ["vocab_size", "hidden_size", "num_hidden_layers",
                       "num_attention_heads", "intermediate_size",
                       "hidden_act", "hidden_dropout_prob",
                       "attention_probs_dropout_prob",
                       "max_position_embeddings", "type_vocab_size",
                       "initializer_range"],
        "BertModel": ["config", "is_training", "input_ids", "input_mask",
                      "token_type_ids", "use_one_hot_embeddings", "scope"],
        "gelu": ["x"],
        "get_activation": ["activation_string"],
        "get_assignment_map_from_checkpoint": ["tvars", "init_checkpoint"],
        "dropout": None,
        "layer_norm": None,
        "layer_norm_and_dropout": None,
        "create_initializer": None,
        "embedding_lookup": None,
        "embedding_postprocessor": None,
        "create_attention_mask_from_input_mask": None,
        "attention_layer": None,
        "transformer_model": None,
        "get_shape_list": None,
        "reshape_to_matrix": None,
        "reshape_from_matrix": None,
        "assert_rank": None,
    },
    "optimization": {
        "create_optimizer": ["loss", "init_lr", "num_train_steps",
                             "num_warmup_steps", "use_tpu"],
        "AdamWeightDecayOptimizer": ["learning_rate", "weight_decay_rate",
                                     "beta_1", "beta_2", "epsilon",
                                     "exclude_from_weight_decay", "name"],
    },
    "create_pretraining_data": {
        "TrainingInstance": ["tokens", "segment_ids", "masked_lm_positions",
                             "masked_lm_labels", "is_random_next"],
        "create_training_instances": [
            "input_files", "tokenizer", "max_seq_length", "dupe_factor",
            "short_seq_prob", "masked_lm_prob", "max_predictions_per_seq",
            "rng"],
        "create_instances_from_document": [
            "all_documents", "document_index", "max_seq_length",
            "short_seq_prob", "masked_lm_prob", "max_predictions_per_seq",
            "vocab_words", "rng"],
        "create_masked_lm_predictions": [
            "tokens", "masked_lm_prob", "max_predictions_per_seq",
            "vocab_words", "rng"],
        "truncate_seq_pair": ["tokens_a", "tokens_b", "max_num_tokens",
                              "rng"],
        "write_instance_to_example_files": [
            "instances", "tokenizer", "max_seq_length",
            "max_predictions_per_seq", "output_files"],
    },
    "run_pretraining": {
        "model_fn_builder": ["bert_config", "init_checkpoint", "learning_rate",
                             "num_train_steps", "num_warmup_steps", "use_tpu",
                             "use_one_hot_embeddings"],
        "get_masked_lm_output": ["bert_config", "input_tensor",
                                 "output_weights", "positions", "label_ids",
                                 "label_weights"],
        "get_next_sentence_output": ["bert_config", "input_tensor", "labels"],
        "gather_indexes": ["sequence_tensor", "positions"],
        "input_fn_builder": ["input_files", "max_seq_length",
                             "max_predictions_per_seq", "is_training",
                             "num_cpu_threads"],
    },
    "run_classifier": {
        "InputExample": ["guid", "text_a", "text_b", "label"],
        "PaddingInputExample": [],
        "InputFeatures": ["input_ids", "input_mask", "segment_ids",
                          "label_id", "is_real_example"],
        "DataProcessor": None,
        "XnliProcessor": None,
        "MnliProcessor": None,
        "MrpcProcessor": None,
        "ColaProcessor": None,
        "convert_single_example": ["ex_index", "example", "label_list",
                                   "max_seq_length", "tokenizer"],
        "file_based_convert_examples_to_features": [
            "examples", "label_list", "max_seq_length", "tokenizer",
            "output_file"],
        "file_based_input_fn_builder": ["input_file", "seq_length",
                                        "is_training", "drop_remainder"],
        "create_model": ["bert_config", "is_training", "input_ids",
                         "input_mask", "segment_ids", "labels", "num_labels",
                         "use_one_hot_embeddings"],
        "model_fn_builder": ["bert_config", "num_labels", "init_checkpoint",
                             "learning_rate", "num_train_steps",
                             "num_warmup_steps", "use_tpu",
                             "use_one_hot_embeddings"],
        "convert_examples_to_features": ["examples", "label_list",
                                         "max_seq_length", "tokenizer"],
        "input_fn_builder": ["features", "seq_length", "is_training",
                             "drop_remainder"],
    },
    "run_squad": {
        "SquadExample": ["qas_id", "question_text", "doc_tokens",
                         "orig_answer_text", "start_position", "end_position",
                         "is_impossible"],
        "InputFeatures": ["unique_id", "example_index", "doc_span_index",
                          "tokens", "token_to_orig_map",
                          "token_is_max_context", "input_ids", "input_mask",
                          "segment_ids", "start_position", "end_position",
                          "is_impossible"],
        "read_squad_examples": ["input_file", "is_training"],
        "convert_examples_to_features": [
            "examples", "tokenizer", "max_seq_length", "doc_stride",
            "max_query_length", "is_training", "output_fn"],
        "RawResult": ["unique_id", "start_logits", "end_logits"],
        "write_predictions": [
            "all_examples", "all_features", "all_results", "n_best_size",
            "max_answer_length", "do_lower_case", "output_prediction_file",
            "output_nbest_file", "output_null_log_odds_file"],
        "get_final_text": ["pred_text", "orig_text", "do_lower_case"],
        "FeatureWriter": ["filename", "is_training"],
        "create_model": ["bert_config", "is_training", "input_ids",
                         "input_mask", "segment_ids",
                         "use_one_hot_embeddings"],
        "model_fn_builder": ["bert_config", "init_checkpoint",
                             "learning_rate", "num_train_steps",
                             "num_warmup_steps", "use_tpu",
                             "use_one_hot_embeddings"],
        "input_fn_builder": ["input_file", "seq_length", "is_training",
                             "drop_remainder"],
        "validate_flags_or_throw": ["bert_config"],
    },
    "extract_features": {
        "InputExample": ["unique_id", "text_a", "text_b"],
        "InputFeatures": ["unique_id", "tokens", "input_ids", "input_mask",
                          "input_type_ids"],
        "read_examples": ["input_file"],
        "convert_examples_to_features": ["examples", "seq_length",
                                         "tokenizer"],
        "model_fn_builder": ["bert_config", "init_checkpoint",
                             "layer_indexes", "use_tpu",
                             "use_one_hot_embeddings"],
        "input_fn_builder": ["features", "seq_length"],
    },
}

# Where the reference read a global flag inside a function, the function
# takes a keyword parameter with the reference's default (SPEC section 7).
_FLAG_PARAMETERS = {
    ("create_pretraining_data", "create_training_instances"):
        {"do_whole_word_mask": False},
    ("create_pretraining_data", "create_instances_from_document"):
        {"do_whole_word_mask": False},
    ("create_pretraining_data", "create_masked_lm_predictions"):
        {"do_whole_word_mask": False},
    ("run_squad", "read_squad_examples"): {"version_2_with_negative": False},
    ("run_squad", "write_predictions"): {"version_2_with_negative": False,
                                         "null_score_diff_threshold": 0.0,
                                         "verbose_logging": False},
    ("run_squad", "get_final_text"): {"verbose_logging": False},
}

# Methods of public classes that the contract names.
_METHODS = {
    ("tokenization", "FullTokenizer"): ["tokenize", "convert_tokens_to_ids",
                                        "convert_ids_to_tokens"],
    ("tokenization", "BasicTokenizer"): ["tokenize"],
    ("tokenization", "WordpieceTokenizer"): ["tokenize"],
    ("modeling", "BertConfig"): ["from_dict", "from_json_file", "to_dict",
                                 "to_json_string"],
    ("modeling", "BertModel"): ["get_pooled_output", "get_sequence_output",
                                "get_all_encoder_layers",
                                "get_embedding_output",
                                "get_embedding_table"],
    ("run_classifier", "DataProcessor"): ["get_train_examples",
                                          "get_dev_examples",
                                          "get_test_examples", "get_labels"],
    ("run_squad", "FeatureWriter"): ["process_feature", "close"],
}

_CASES = [(module, name, params) for module, names in sorted(_PUBLIC.items())
          for name, params in sorted(names.items())]


def _parameters(obj):
  """The parameters of a function, or of a class's constructor."""
  parameters = list(inspect.signature(obj).parameters.values())
  return [p for p in parameters
          if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


@pytest.mark.parametrize("module,name,params", _CASES,
                         ids=["%s.%s" % case[:2] for case in _CASES])
def test_reference_name_is_importable_with_its_parameters(module, name,
                                                          params):
  obj = getattr(importlib.import_module(module), name)
  assert callable(obj)
  if params is None:
    return
  parameters = _parameters(obj)
  assert [p.name for p in parameters[:len(params)]] == params
  for extra in parameters[len(params):]:
    assert extra.default is not inspect.Parameter.empty, (
        "%s.%s: parameter %s added without a default" %
        (module, name, extra.name))


@pytest.mark.parametrize("module,name", sorted(_FLAG_PARAMETERS))
def test_former_flags_are_keyword_parameters_with_reference_defaults(module,
                                                                     name):
  obj = getattr(importlib.import_module(module), name)
  defaults = {p.name: p.default for p in _parameters(obj)}
  for parameter, default in _FLAG_PARAMETERS[(module, name)].items():
    assert defaults.get(parameter, "missing") == default, parameter


@pytest.mark.parametrize("module,name", sorted(_METHODS))
def test_public_classes_keep_their_methods(module, name):
  cls = getattr(importlib.import_module(module), name)
  for method in _METHODS[(module, name)]:
    assert callable(getattr(cls, method, None)), "%s.%s.%s" % (module, name,
                                                               method)


def test_raw_result_is_a_namedtuple():
  run_squad = importlib.import_module("run_squad")
  result = run_squad.RawResult(unique_id=1, start_logits=[0.5],
                               end_logits=[0.25])
  assert result._fields == ("unique_id", "start_logits", "end_logits")
  assert tuple(result) == (1, [0.5], [0.25])


def test_names_listed_in_all_exist():
  for module in _PUBLIC:
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", ()):
      assert hasattr(mod, name), "%s.__all__ names %s" % (module, name)
