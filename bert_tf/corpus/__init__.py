"""Corpus-scale data on Apache Beam, and vocabularies of one's own.

`beam_support` imports Beam (a one-line error naming the `beam` extra when it
is missing) and parses `--pipeline_options`; `instances` runs
`create_pretraining_data.py --num_shards` as a Beam pipeline whose shard k is
byte-identical to part k of `--num_workers`; `wiki` turns MediaWiki pages and
plain text into sentences and `prepare` is `prepare_corpus.py`'s pipeline;
`vocab` learns and extends WordPiece vocabularies for `learn_vocab.py`.
Everything here imports Beam and the corpus libraries only when used.

In a Beam worker process, which imports this package to run a pipeline's
steps, TensorFlow's import is quieted first (`quiet.when_beam_worker`);
imported anywhere else, the package changes nothing in the process.
"""

from bert_tf.cli import quiet

quiet.when_beam_worker()
