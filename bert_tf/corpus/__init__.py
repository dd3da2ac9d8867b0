"""Corpus-scale data on Apache Beam, and vocabularies of one's own:
`beam_support` (Beam, `--pipeline_options`), `instances`
(`create_pretraining_data.py --num_shards`), `wiki` and `prepare`
(`prepare_corpus.py`), `vocab` (`learn_vocab.py`). Beam and the corpus
libraries are imported only when used; a Beam worker quiets TensorFlow's
import first (`quiet.when_beam_worker`)."""

from bert_tf.cli import quiet

quiet.when_beam_worker()
