"""RunConfig: its validation rules, its JSON round trip, and the flags that make it
(configs/from_flags.py), parsed in this process into a copy of the flags."""

import copy
import dataclasses
import json
import re

import pytest

from configs import definitions
from configs.definitions import Checkpointing
from configs.definitions import Data
from configs.definitions import Distribution
from configs.definitions import Model
from configs.definitions import Optimizer
from configs.definitions import Performance
from configs.definitions import RunConfig
from configs.definitions import Schedule

GOOD = RunConfig()


def replace(config=GOOD, **groups):
  """`config` with fields of its groups replaced: replace(optimizer={'momentum': 1.0})."""
  changes = {}
  for name, value in groups.items():
    group = getattr(config, name)
    changes[name] = (
      dataclasses.replace(group, **value) if dataclasses.is_dataclass(group) else value
    )
  return dataclasses.replace(config, **changes)


def scaled(**schedule):
  return {'lr_scaling': 'linear', 'base_batch_size': 64, **schedule}


@pytest.mark.parametrize(
  'config, message',
  [
    (replace(optimizer={'momentum': 1.0}), '--momentum=1.0: give a value in [0, 1)'),
    (replace(optimizer={'beta_2': -0.1}), '--beta_2=-0.1: give a value in [0, 1)'),
    (
      replace(optimizer={'trust_coefficient': 0.0}),
      '--trust_coefficient=0.0: give a value in (0, 1]',
    ),
    (replace(model={'bn_momentum': 1.0}), '--bn_momentum=1.0: give a value in [0, 1)'),
    (replace(target='accuracy>0.9'), '--target=accuracy>0.9: write it NAME>=VALUE or NAME<=VALUE'),
    (
      replace(data={'hyperparameters': {'image_shape': (8, 8)}}),
      '--image_shape: give three positive integers: height,width,channels, not 8,8',
    ),
    (replace(data={'hyperparameters': {'image_shape': (8, 0, 1)}}), 'not 8,0,1'),
    (replace(performance={'profile_steps': (3,)}), '--profile_steps: give first,last'),
    (
      replace(performance={'profile_steps': (3, 2)}),
      '--profile_steps=3,2: give two step numbers, 1 <= first <= last',
    ),
    (replace(performance={'profile_steps': (0, 2)}), '--profile_steps=0,2'),
    (replace(schedule={'lr_scaling': 'linear'}), '--lr_scaling needs --base_batch_size'),
    (replace(schedule={'warmup_epochs': 1.0}), '--warmup_epochs ramps up to the scaled'),
    (
      replace(epochs=5, schedule=scaled(warmup_epochs=6.0)),
      '--warmup_epochs must not exceed --epochs',
    ),
    (
      replace(
        name='mirrored', batch_size=65, distribution={'strategy': 'mirrored', 'num_replicas': 2}
      ),
      'run mirrored: --batch_size=65 cannot be split evenly over 2 replicas; use a multiple of 2',
    ),
    (
      replace(
        name='ps', batch_size=64, distribution={'strategy': 'parameter_server', 'num_workers': 3}
      ),
      'run ps: --batch_size=64 cannot be split evenly over 3 workers; use a multiple of 3',
    ),
    (
      replace(name='one', batch_size=64, model={'ghost_batch_size': 48}),
      'run one: --ghost_batch_size=48 does not divide the per-replica batch of 64',
    ),
    (
      replace(
        performance={'mixed_precision': 'mixed_float16'},
        distribution={'strategy': 'central_storage', 'num_replicas': 2},
      ),
      (
        "--mixed_precision=mixed_float16 needs Keras' LossScaleOptimizer, whose variables "
        'central_storage cannot update; use mixed_bfloat16 there'
      ),
    ),
    (
      replace(performance={'profile_steps': (1, 2)}, distribution={'strategy': 'parameter_server'}),
      '--profile_steps traces this process, but under parameter_server',
    ),
    (
      replace(optimizer={'optimizer': 'compiled'}),
      '--optimizer=compiled trains with the optimizer a --model=module:function compiled; '
      '--model=cnn is built in',
    ),
    (
      replace(
        optimizer={'optimizer': 'compiled'},
        model={'model': 'mine:build'},
        schedule={'lr_schedule': 'cosine'},
      ),
      "--optimizer=compiled trains with the compiled optimizer's own learning rate: "
      '--lr_scaling, --warmup_epochs and --lr_schedule do not apply; drop them',
    ),
  ],
)
def test_validate_refuses_a_run_that_cannot_work(config, message):
  with pytest.raises(definitions.ConfigError, match=re.escape(message)) as raised:
    config.validate()
  assert '\n' not in str(raised.value)  # One line: run.py prints it as the whole error.
  assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
  'config',
  [
    GOOD,
    replace(target='loss<=0.1', optimizer={'trust_coefficient': 1.0, 'momentum': 0.0}),
    replace(optimizer={'optimizer': 'compiled'}, model={'model': 'mine:build'}),
    replace(epochs=5, schedule=scaled(warmup_epochs=5.0)),
    replace(batch_size=66, distribution={'strategy': 'mirrored', 'num_replicas': 2}),
    # The replicas are counted at run time (0: all), where the batch is checked again.
    replace(batch_size=65, distribution={'strategy': 'mirrored', 'num_replicas': 0}),
    replace(
      performance={'mixed_precision': 'mixed_bfloat16'},
      distribution={'strategy': 'central_storage', 'num_replicas': 2},
    ),
    replace(performance={'profile_steps': (2, 2)}, distribution={'strategy': 'mirrored'}),
    replace(
      batch_size=64,
      model={'ghost_batch_size': 16},
      distribution={'strategy': 'multi_worker_mirrored', 'num_workers': 2},
    ),
  ],
)
def test_validate_passes_a_run_that_can_work_and_returns_it(config):
  assert config.validate() is config


def test_json_round_trip_gives_the_same_config_with_its_tuples():
  config = RunConfig(
    name='lamb-mirrored',
    run_dir='runs/e/lamb-mirrored',
    condition='lamb',
    epochs=3,
    batch_size=96,
    steps_per_epoch=7,
    seed=4,
    target='auc>=0.8',
    data=Data('synthetic', '/data', False, {'image_shape': (8, 8, 1), 'num_classes': 3}),
    model=Model('mlp', True, 16, 0.9),
    optimizer=Optimizer('lamb', 0.01, 0.8, 0.85, 0.99, 1e-6, 0.01, 0.002),
    schedule=Schedule('sqrt', 32, 1.5, 'cosine'),
    performance=Performance(4, True, 'mixed_bfloat16', (2, 5), 0, None),
    checkpoints=Checkpointing(2, 50, False),
    distribution=Distribution('mirrored', 2, 2, {'num_packs': 2, 'cross_device_ops': 'auto'}, 60.0),
    flags={'strategies': 'mirrored', 'batch_size': 96, 'profile_steps': '2,5'},
  ).validate()
  saved = json.loads(json.dumps(config.to_json()))  # As config.json holds it.
  back = RunConfig.from_json(saved)
  assert back == config
  assert isinstance(back.data, Data) and isinstance(back.distribution, Distribution)
  assert back.data.hyperparameters['image_shape'] == (8, 8, 1)
  assert isinstance(back.data.hyperparameters['image_shape'], tuple)
  assert back.performance.profile_steps == (2, 5)
  assert isinstance(back.performance.profile_steps, tuple)
  assert back.performance.intra_op_threads == 0 and back.performance.inter_op_threads is None


def test_from_json_keeps_defaults_for_fields_it_does_not_hold():
  back = RunConfig.from_json({'name': 'x', 'data': {'dataset': 'synthetic'}})
  assert back == dataclasses.replace(GOOD, name='x', data=Data(dataset='synthetic'))


# From flags: parsed into a copy of absl's FLAGS, so nothing global changes.


@pytest.fixture(scope='module')
def parse():
  from absl import flags

  import run  # noqa: F401  # Defines every flag: run.py's and each strategy's own.

  def parse_flags(*args):
    values = copy.deepcopy(flags.FLAGS)
    values(['run.py', *args])
    return values

  return parse_flags


@pytest.fixture
def experiment(parse, tmp_path):
  from configs import from_flags

  def plan(*args):
    return from_flags.experiment(parse(f'--logdir={tmp_path}', '--experiment=e', *args))

  return plan


def test_flags_map_onto_the_run_config(experiment, tmp_path):
  runs = experiment(
    '--strategies=one_device',
    '--epochs=3',
    '--optimizer=lamb',
    '--momentum=0.5',
    '--lr_scaling=sqrt',
    '--base_batch_size=32',
    '--warmup_epochs=1',
    '--lr_schedule=step',
    '--dataset=synthetic',
    '--image_shape=8,8,3',
    '--num_classes=4',
    '--profile_steps=2,4',
    '--checkpoint_every_steps=20',
    '--noresume',
    '--seed=7',
  ).runs
  assert len(runs) == 1
  run = runs[0]
  assert (run.name, run.run_dir, run.epochs, run.seed) == (
    'one_device',
    str(tmp_path / 'e' / 'one_device'),
    3,
    7,
  )
  assert run.data == Data('synthetic', '', True, {'image_shape': (8, 8, 3), 'num_classes': 4})
  assert (run.optimizer.optimizer, run.optimizer.momentum) == ('lamb', 0.5)
  assert run.schedule == Schedule('sqrt', 32, 1.0, 'step')
  assert run.performance.profile_steps == (2, 4)
  assert run.checkpoints == Checkpointing(1, 20, False)
  assert run.distribution.strategy == 'one_device' and run.distribution.options == {}
  # The flags as the run's own process would have been given them.
  assert run.flags['optimizer'] == 'lamb' and run.flags['image_shape'] == '8,8,3'
  assert run.flags['strategies'] == 'one_device' and run.flags['run_name'] == 'one_device'


def test_a_hyperparameter_no_run_takes_is_refused(experiment, parse, tmp_path):
  """--dropout with --model=cnn would change nothing: refused in one line naming who takes
  it; one that some variant's model takes is kept, one a variant gives its own model that
  does not take it is refused for that variant; --predict from a model card likewise."""
  from configs import from_flags

  with pytest.raises(ValueError) as refused:
    experiment('--model=cnn', '--dropout=0.2')
  assert str(refused.value) == (
    '--dropout is a hyperparameter of --model=transformer, not of --model=cnn '
    '--dataset=digits: it would change nothing; drop it, or choose a model or data set that '
    'takes it'
  )
  with pytest.raises(ValueError, match='--num_classes is a hyperparameter of --dataset=synthetic'):
    experiment('--dataset=digits', '--num_classes=5')
  runs = experiment(
    '--variant=a: --model=cnn', '--variant=b: --model=transformer', '--num_layers=3'
  ).runs
  assert {run.model.model: run.model.hyperparameters.get('num_layers') for run in runs} == {
    'cnn': None,
    'transformer': 3,
  }
  with pytest.raises(ValueError, match='^--variant=a: --num_layers is a hyperparameter'):
    experiment('--variant=a: --model=cnn --num_layers=3', '--variant=b: --model=transformer')
  with pytest.raises(ValueError, match='--num_layers is a hyperparameter of --model=transformer'):
    from_flags.prediction(
      parse(
        f'--logdir={tmp_path}',
        '--predict',
        '--model=resnet50',
        '--per_device_batch=8',
        '--num_layers=3',
      )
    )
  assert (
    experiment('--model=transformer', '--dropout=0.1').runs[0].model.hyperparameters['dropout']
    == 0.1
  )


def test_thread_flags_are_none_unless_given(experiment):
  assert experiment('--strategies=one_device').runs[0].performance.intra_op_threads is None
  given = (
    experiment('--strategies=one_device', '--intra_op_threads=0', '--inter_op_threads=3')
    .runs[0]
    .performance
  )
  assert (given.intra_op_threads, given.inter_op_threads) == (0, 3)


def test_verbosity_is_passed_on_only_when_given(experiment):
  assert experiment('--strategies=one_device').verbosity is None
  assert experiment('--strategies=one_device', '--verbosity=1').verbosity == 1


def test_a_strategy_gets_only_its_own_options(experiment):
  runs = experiment(
    '--strategies=one_device,mirrored,parameter_server',
    '--num_packs=2',
    '--num_ps=2',
    '--variable_partitioner=min_size',
    '--num_replicas=2',
  ).runs
  options = {run.name: run.distribution.options for run in runs}
  assert options == {
    'one_device': {},
    'mirrored': {'cross_device_ops': 'auto', 'num_packs': 2},
    'parameter_server': {'num_ps': 2, 'variable_partitioner': 'min_size', 'ps_colocated': False},
  }
  assert runs[1].flags['num_packs'] == 2 and 'num_packs' not in runs[0].flags


def test_a_batch_sweep_plans_one_run_per_batch(experiment, tmp_path):
  runs = experiment(
    '--strategies=one_device,mirrored', '--batch_size=32,64', '--num_replicas=2'
  ).runs
  assert [(r.name, r.batch_size) for r in runs] == [
    ('one_device-b32', 32),
    ('one_device-b64', 64),
    ('mirrored-b32', 32),
    ('mirrored-b64', 64),
  ]
  assert runs[2].run_dir == str(tmp_path / 'e' / 'mirrored-b32')
  assert [r.flags['batch_size'] for r in runs] == [32, 64, 32, 64]


def test_weak_scaling_multiplies_the_batch_by_the_replicas_and_workers(experiment):
  runs = experiment(
    '--strategies=one_device,mirrored,multi_worker_mirrored',
    '--scaling=weak',
    '--batch_size=32',
    '--num_replicas=2',
    '--num_workers=3',
  ).runs
  assert [(r.name, r.batch_size) for r in runs] == [
    ('one_device', 32),
    ('mirrored', 64),
    ('multi_worker_mirrored', 96),
  ]


def test_each_variant_plans_the_runs_with_its_flags_on_top(experiment):
  runs = experiment(
    '--strategies=mirrored',
    '--num_replicas=2',
    '--optimizer=adam',
    '--variant=base:',
    '--variant=lamb: --optimizer=lamb --num_packs=3',
    '--variant=warm: --lr_scaling=linear --base_batch_size=32 --warmup_epochs=1',
  ).runs
  assert [(r.name, r.condition) for r in runs] == [
    ('base-mirrored', 'base'),
    ('lamb-mirrored', 'lamb'),
    ('warm-mirrored', 'warm'),
  ]
  assert [r.optimizer.optimizer for r in runs] == ['adam', 'lamb', 'adam']
  assert [r.distribution.options['num_packs'] for r in runs] == [1, 3, 1]
  assert [r.schedule.lr_scaling for r in runs] == ['none', 'none', 'linear']
  assert runs[2].schedule.warmup_epochs == 1.0
  assert [r.flags['condition'] for r in runs] == ['base', 'lamb', 'warm']


@pytest.mark.parametrize(
  'args, message',
  [
    (['--strategies=one_device', '--momentum=1.0'], '--momentum=1.0: give a value in [0, 1)'),
    (
      ['--strategies=mirrored', '--num_replicas=2', '--batch_size=65'],
      'run mirrored: --batch_size=65 cannot be split evenly over 2 replicas',
    ),
    (
      ['--strategies=central_storage', '--mixed_precision=mixed_float16'],
      "--mixed_precision=mixed_float16 needs Keras' LossScaleOptimizer",
    ),
    (
      ['--strategies=one_device', '--variant=a: --momentum=1'],
      '--variant=a: --momentum=1.0: give a value in [0, 1)',
    ),
    (['--strategies=one_device', '--variant=a: --epochs=x'], '--variant=a: '),
    (
      ['--strategies=one_device', '--variant=a:', '--variant=a: --seed=1'],
      '--variant=a is given twice',
    ),
    (
      ['--strategies=one_device,mirrored', '--run_name=mine'],
      '--run_name=mine names one run, but the flags plan 2',
    ),
  ],
)
def test_flags_for_a_run_that_cannot_work_are_refused(experiment, args, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    experiment(*args)


def test_report_only_needs_an_experiment(parse):
  from configs import from_flags

  with pytest.raises(ValueError, match='--report_only needs --experiment'):
    from_flags.experiment(parse('--report_only'))


def test_run_reads_back_the_config_a_launcher_wrote(experiment, parse, tmp_path):
  from configs import from_flags
  from records import files

  config = experiment('--strategies=mirrored', '--num_replicas=2', '--profile_steps=1,2').runs[0]
  path = files.write_json(str(tmp_path / 'config.json'), config.to_json())
  assert from_flags.child_run(parse(f'--run_config={path}')) == config


def cluster(**jobs):
  ports = iter(range(2222, 2300))
  return {job: [f'localhost:{next(ports)}' for _ in range(count)] for job, count in jobs.items()}


@pytest.mark.parametrize(
  'strategy, jobs',
  [
    ('multi_worker_mirrored', {'chief': 1, 'worker': 2}),
    ('multi_worker_mirrored', {'worker': 3}),
    ('parameter_server', {'chief': 1, 'worker': 3, 'ps': 2}),
  ],
)
def test_a_tf_config_task_takes_its_workers_from_the_cluster(parse, strategy, jobs):
  from configs import task_flags

  tf_config = {'cluster': cluster(**jobs), 'task': {'type': 'worker', 'index': 0}}
  values = parse(f'--strategies={strategy}', '--num_workers=2', '--batch_size=96', '--experiment=e')
  experiment, parsed = task_flags.task(json.dumps(tf_config), values)
  assert parsed == tf_config
  (run,) = experiment.runs
  assert run.distribution.num_workers == 3
  assert run.flags['num_workers'] == 3
  assert values.num_workers == ['2']  # The caller's flags are left as they were.


def test_an_in_process_task_is_the_one_run_without_tf_config(parse):
  from configs import task_flags

  experiment, tf_config = task_flags.task(
    None, parse('--strategies=mirrored', '--in_process', '--num_replicas=2', '--experiment=e')
  )
  assert tf_config is None
  assert [run.name for run in experiment.runs] == ['mirrored']


@pytest.mark.parametrize(
  'tf_config, args, message',
  [
    (None, ['--strategies=one_device,mirrored'], 'give one strategy to --strategies'),
    (None, ['--strategies=one_device', '--batch_size=32,64'], 'give one value to --batch_size'),
    (
      None,
      ['--strategies=multi_worker_mirrored'],
      'multi_worker_mirrored --in_process needs TF_CONFIG',
    ),
    (
      '{"cluster": {"worker": ["localhost:2222"]}, "task": {"type": "worker", "index": 0}}',
      ['--strategies=mirrored'],
      'TF_CONFIG is set, but mirrored runs in one process',
    ),
    (
      (
        '{"cluster": {"worker": ["localhost:2222", "localhost:2223", "localhost:2224"]}, '
        '"task": {"type": "worker", "index": 0}}'
      ),
      ['--strategies=multi_worker_mirrored'],
      '--batch_size=64 cannot be split evenly over 3 workers',
    ),
  ],
)
def test_a_task_that_is_not_one_run_is_refused(parse, tf_config, args, message):
  from configs import task_flags

  with pytest.raises(ValueError, match=re.escape(message)):
    task_flags.task(tf_config, parse('--experiment=e', *args))


def test_a_model_brings_its_own_defaults_for_the_flags_not_given(experiment):
  (run,) = experiment('--model=wide_deep', '--strategies=one_device').runs
  assert (run.data.dataset, run.batch_size, run.optimizer.learning_rate) == (
    'synthetic_clicks',
    512,
    0.01,
  )
  assert run.model_sizes == {
    'vocab_sizes': [500000, 300000, 200000, 50000, 10000, 1000],
    'embedding_dim': 16,
  }
  (run,) = experiment(
    '--model=wide_deep',
    '--strategies=one_device',
    '--batch_size=128',
    '--learning_rate=0.1',
    '--vocab_sizes=7,8',
  ).runs
  assert (run.batch_size, run.optimizer.learning_rate, run.data.hyperparameters['vocab_sizes']) == (
    128,
    0.1,
    (7, 8),
  )
  (run,) = experiment('--model=transformer', '--strategies=one_device').runs
  assert (run.data.dataset, run.batch_size) == ('synthetic_tokens', 64)
  (run,) = experiment('--strategies=one_device').runs
  assert (run.data.dataset, run.batch_size, run.optimizer.learning_rate) == ('digits', 64, 0.001)
  (run,) = experiment(
    '--model=wide_deep', '--strategies=one_device', '--variant=big:--batch_size=1024'
  ).runs  # A variant's too.
  assert (run.data.dataset, run.batch_size) == ('synthetic_clicks', 1024)
