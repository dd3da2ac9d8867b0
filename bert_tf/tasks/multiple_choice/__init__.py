"""Multiple choice (SWAG): a context and N endings, pick the right one.

The BERT paper's SWAG recipe (Devlin et al. 2018, section 4.4): each choice
is one `[CLS] context [SEP] start + ending [SEP]` pair, one learned vector
scores each choice's pooled output, softmax over the choices. `data` reads
the SWAG CSV and JSON-lines files, `features` writes the records and reads
them back, `head` is the output layer on the one `model_fn`
(`bert_tf/train/model_fn.py`), `metrics` the eval metrics, `predictions`
the `test_results.tsv` writer and `task` puts them together for
`run_multiple_choice.py`.
"""
