"""Each task's data, features, model head and metrics.

`classifier/` (GLUE, XNLI and tsv tasks, multi-label, windows over long
texts), `squad/` (SQuAD 1.1/2.0), `ner/` (CoNLL-style named entities),
`multiple_choice/` (SWAG: a context and N endings),
`pretraining/` (the masked-LM head; the speed and scale parts of
`create_pretraining_data.py`), `features.py` (packing one or two token
sequences into BERT's input, shared by classification and feature
extraction) and `pooling.py` (one vector per line: feature extraction's
`--pooling`). The scripts at the root import the reference's public names
from here; how they train, evaluate, predict and export is
`bert_tf/runner/loop.py`'s.
"""
