"""A small Transformer encoder classifier (Vaswani et al. 2017) over token ids.

Token and learned position embeddings, `num_layers` post-norm blocks of self-attention and an
MLP (4 x d_model wide), each with a residual and LayerNormalization, then the mean over the
sequence and the logits. --dropout drops out as BERT does (Devlin et al. 2019, its modeling.py):
the attention probabilities, and the embeddings and each block's attention and MLP outputs
before their residual. Its normalization is LayerNorm, per example: --batch_norm and
--ghost_batch_size are refused for it rather than ignored.
"""

import keras
from keras import layers
from keras import ops

BATCH_NORM = False
DEFAULTS = {'dataset': 'synthetic_tokens'}
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'vocab_size': {
    'default': 10000,
    'least': 4,
    'most': 2_147_483_647,  # int32 token ids.
    'help': 'token ids 0..vocab_size-1, the rows of its embedding.',
  },
  'num_layers': {'default': 2, 'least': 1, 'help': 'encoder blocks (self-attention and MLP).'},
  'd_model': {
    'default': 64,
    'least': 1,
    'help': 'width of the embeddings and blocks, a multiple of --num_heads.',
  },
  'num_heads': {
    'default': 4,
    'least': 1,
    'help': 'attention heads, each d_model / num_heads wide.',
  },
  'dropout': {
    'default': 0.0,
    'least': 0.0,
    'most': 0.9,
    'help': "rate of BERT's dropout (0.1 in BERT): attention probabilities, embeddings, block "
    'outputs.',
  },
}


class PositionEmbedding(layers.Layer):
  """A learned vector per position, added to the token embeddings (Keras has no such layer)."""

  def build(self, input_shape):
    self.positions = self.add_weight(
      shape=input_shape[1:], initializer='random_uniform', name='positions'
    )

  def call(self, inputs):
    return inputs + ops.cast(self.positions, inputs.dtype)


def build(
  input_shape, num_classes, normalization, vocab_size, num_layers, d_model, num_heads, dropout
):
  if len(input_shape) != 1:
    raise ValueError(
      f'--model=transformer reads sequences of token ids, not examples of shape '
      f'{input_shape}; use --dataset=synthetic_tokens or imdb'
    )
  tokens = keras.Input(input_shape, dtype='int32')
  x = PositionEmbedding()(layers.Embedding(vocab_size, d_model)(tokens))
  x = _dropped(x, dropout)
  for _ in range(num_layers):
    attention = layers.MultiHeadAttention(num_heads, d_model // num_heads, dropout=dropout)(x, x)
    x = layers.LayerNormalization()(x + _dropped(attention, dropout))
    mlp = layers.Dense(d_model)(layers.Dense(4 * d_model, activation='gelu')(x))
    x = layers.LayerNormalization()(x + _dropped(mlp, dropout))
  x = layers.GlobalAveragePooling1D()(x)
  return keras.Model(tokens, layers.Dense(num_classes)(x), name='transformer')


def _dropped(x, rate):
  return layers.Dropout(rate)(x) if rate else x
