"""The batch arithmetic of a run, in one value: what one step, one replica and one epoch hold.

A global batch is one synchronous update. Under parameter servers it is split over the
`num_workers` workers, each of whose steps is one asynchronous update of its share
(`step_batch_size`); elsewhere one step is the global batch. Each step's batch is split
evenly over the replicas in sync.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Batching:
  global_batch_size: int
  replicas_in_sync: int
  worker_shares: int  # The workers a global batch is shared over: num_workers under a
  # coordinator, else 1.
  steps_per_epoch: int

  @property
  def step_batch_size(self) -> int:
    """The examples one step (one update) averages over."""
    return self.global_batch_size // self.worker_shares

  @property
  def per_replica_batch_size(self) -> int:
    return self.step_batch_size // self.replicas_in_sync

  @classmethod
  def of(
    cls,
    global_batch_size: int,
    replicas_in_sync: int,
    worker_shares: int,
    train_size: int,
    steps_per_epoch: int = 0,
  ) -> 'Batching':
    """The batching of a run; ValueError naming the flag when the batch cannot be split.
    `steps_per_epoch` 0 means one pass over the `train_size` training examples."""
    divisor = replicas_in_sync * worker_shares
    if global_batch_size % divisor:
      raise ValueError(
        f'--batch_size={global_batch_size} is not divisible by the {divisor} '
        f'replicas (or parameter-server workers); use a multiple of {divisor}'
      )
    step_batch = global_batch_size // worker_shares
    steps_per_epoch = steps_per_epoch or train_size // step_batch
    if steps_per_epoch < 1:
      raise ValueError(
        f'--batch_size={global_batch_size} exceeds the {train_size} training '
        'examples; use a smaller batch'
      )
    return cls(global_batch_size, replicas_in_sync, worker_shares, steps_per_epoch)
