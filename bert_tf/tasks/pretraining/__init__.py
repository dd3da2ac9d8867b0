"""Pre-training pieces: the masked-LM and next-sentence heads as values
(`heads`; the masked LM shared by `run_pretraining.py` and
`predict_masked_lm.py`), the records' input_fn and length check (`inputs`),
the reference's algorithm of `create_pretraining_data.py` (`instances`:
documents to masked instances), the same masking run in the input
pipeline for `--dynamic_masking` (`masking`), and speed and scale for
`create_pretraining_data.py`: its record encoder (`records`), its copy of
`random.shuffle` (`shuffle`), and its multi-process runner and progress
lines (`processes`). They change how fast and in how many processes it
runs, never what it writes. `whole_words` chooses the whole words to mask,
and, behind `--do_chinese_whole_word_mask`, carries the jieba segmenter's
Chinese words on the character tokens.
"""
