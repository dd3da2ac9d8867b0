"""Small files in the GLUE task layouts that ../shared/data does not hold.

Shared by tests/test_classifier_data.py (the processors) and
tests/test_run_classifier.py (an STS-B end-to-end run).
"""

import os

from helpers import write_tsv

__all__ = ["QQP_TRAIN", "QQP_TEST", "QNLI_TRAIN", "QNLI_TEST", "WNLI_TRAIN",
           "WNLI_TEST", "STSB_HEADER", "STSB_PAIRS", "stsb_lines", "write_glue"]

QQP_TRAIN = [
    "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
    "133273\t213221\t213222\tHow is the life of a math student?\t"
    "Which level of preparation is enough for the exam?\t0",
    "402555\t536040\t536041\tHow do I control my horny emotions?\t"
    "How do you control your horniness?\t1",
]
QQP_TEST = ["id\tquestion1\tquestion2",
             "0\tWould the idea of Trump be better?\tWhat does a Trump win "
             "mean?"]
QNLI_TRAIN = [
    "index\tquestion\tsentence\tlabel",
    "0\tWhen did the third Digimon series begin?\tUnlike the two seasons "
    "before it, Digimon Tamers takes a darker approach.\tnot_entailment",
    "1\tWhich missile batteries often have individual launchers?\tThe "
    "missile batteries often have launchers several kilometres apart.\t"
    "entailment",
]
QNLI_TEST = ["index\tquestion\tsentence",
              "0\tWhat organization is devoted to Jihad?\tFor some "
              "decades, Islamic Jihad has been an organization."]
WNLI_TRAIN = [
    "index\tsentence1\tsentence2\tlabel",
    "0\tI stuck a pin through a carrot. When I pulled the pin out, it had "
    "a hole.\tThe carrot had a hole.\t1",
    "1\tJohn couldn't see the stage with Billy in front of him because he "
    "is so short.\tJohn is so short.\t1",
    "2\tThe police arrested all of the gang members. They were trying to "
    "stop the drug trade.\tThe police were trying to stop the gang.\t0",
]
WNLI_TEST = ["index\tsentence1\tsentence2",
              "0\tMaude and Dora had seen the trains.\tHorses had seen the "
              "trains."]
STSB_HEADER = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
                "sentence1\tsentence2")
STSB_PAIRS = [
    ("A plane is taking off.", "An air plane is taking off.", "5.000"),
    ("A man is playing a large flute.", "A man is playing a flute.",
     "3.800"),
    ("Three men are playing chess.", "Two men are playing chess.", "2.600"),
    ("A man is smoking.", "A man is skating.", "0.500"),
    ("The man is playing the piano.", "The man is playing the guitar.",
     "1.600"),
    ("Some men are fighting.", "Two men are fighting.", "4.250"),
]


def stsb_lines(pairs, with_score=True):
  """STS-B TSV lines (header first) for (sentence1, sentence2, score) pairs."""
  lines = [STSB_HEADER + ("\tscore" if with_score else "")]
  for i, (a, b, score) in enumerate(pairs):
    cells = [str(i), "main-captions", "MSRvid", "2012test", "%04d" % (i + 1),
             "none", "none", a, b]
    lines.append("\t".join(cells + ([score] if with_score else [])))
  return lines


def write_glue(folder, train, test, dev=None):
  """Writes train/dev/test.tsv of one GLUE task under `folder` (dev: train)."""
  write_tsv(os.path.join(folder, "train.tsv"), train)
  write_tsv(os.path.join(folder, "dev.tsv"), dev or train)
  write_tsv(os.path.join(folder, "test.tsv"), test)
  return folder
