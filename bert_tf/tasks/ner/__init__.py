"""Named-entity recognition: CoNLL readers, tag schemes, features, metrics,
the token head (`model`) and the task (`task`: files in, predictions out)."""
