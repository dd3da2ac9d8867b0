"""Named-entity recognition: CoNLL readers, tag schemes, features, metrics."""
