"""Text classification with `TextVectorization` inside the model, from a directory of text
files, as Keras' "Text classification from scratch" example reads IMDB:
`--model=text_classification:build --dataset=text_classification:load` from this directory.

2,500 synthetic reviews (seeded), one file each under `train/{neg,pos}` and `test/{neg,pos}`,
read by `keras.utils.text_dataset_from_directory` into batched pipelines of strings; the model
maps strings to token ids itself (its vocabulary adapted on the training texts), then an
`Embedding` (whose gradient is sparse, its rows as many as the batch's tokens) and a pooled
classifier with a sigmoid.
"""

import functools
import os

import keras
import numpy as np
import written_once
from keras import layers

POSITIVE = 'great wonderful superb loved excellent fun'.split()
NEGATIVE = 'awful boring terrible hated bad dull'.split()
FILLER = 'the a movie film plot actor scene story it was and of'.split()
SPLITS = {'train': 2000, 'test': 500}
VOCABULARY, LENGTH = 2000, 64


def _write(scratch):
  rng = np.random.default_rng(0)
  for split, count in SPLITS.items():
    for label, words in (('neg', NEGATIVE), ('pos', POSITIVE)):
      os.makedirs(os.path.join(scratch, split, label))
      for i in range(count // 2):
        tokens = [*rng.choice(FILLER, rng.integers(10, 60)), *rng.choice(words, 3)]
        rng.shuffle(tokens)
        with open(os.path.join(scratch, split, label, f'{i}.txt'), 'w') as f:
          f.write(' '.join(tokens))


def _directory():
  return written_once.ensure('text_classification', _write)


def load():
  read = keras.utils.text_dataset_from_directory
  return (
    read(os.path.join(_directory(), 'train'), batch_size=32, seed=1),
    read(os.path.join(_directory(), 'test'), batch_size=32, shuffle=False),
  )


@functools.cache
def _training_texts():
  """The training reviews, read once per process (every copy of the model adapts on them)."""
  train, texts = os.path.join(_directory(), 'train'), []
  for label in ('neg', 'pos'):
    for name in sorted(os.listdir(os.path.join(train, label))):
      with open(os.path.join(train, label, name)) as f:
        texts.append(f.read())
  return np.array(texts)


def build():
  vectorize = layers.TextVectorization(max_tokens=VOCABULARY, output_sequence_length=LENGTH)
  vectorize.adapt(_training_texts())
  text = keras.Input((), dtype='string')
  x = layers.Dropout(0.2)(layers.Embedding(VOCABULARY, 64)(vectorize(text)))
  out = layers.Dense(1, activation='sigmoid')(layers.GlobalAveragePooling1D()(x))
  model = keras.Model(text, out, name='text_classification')
  model.compile(loss='binary_crossentropy', optimizer='adam', metrics=['accuracy'])
  return model
