"""Flags to configuration: with configs/task_flags.py, the only modules of run.py that read
flag values (the benchmarks read their own). `experiment()` maps the parsed flags onto the
experiment's validated `RunConfig`s (each strategy crossed with the swept values, once per
`--variant`); task_flags.py onto the one run of a process started by hand or by a scheduler
(srun, mpirun); `child_run()` reads the run a launcher's child was started with."""

import copy
import dataclasses
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from absl import flags
from absl.flags import FlagValues

import data
import models
import strategies
import user_code
from configs import definitions
from configs import flags as _defined  # noqa: F401  # Defines the flags read here.
from configs import hyperparameters
from configs import loops
from configs import names
from configs import noise_scale_of
from configs import plan
from configs.definitions import Experiment
from configs.definitions import Prediction
from configs.definitions import RunConfig
from records import files
from records import paths
from records import storage
from records import target as target_lib

FLAGS = flags.FLAGS


def action(values: FlagValues = FLAGS) -> str:
  """What run.py is asked to do: 'run_config', 'dry_run', 'predict', 'compare',
  'report_only', 'in_process' or 'launch'."""
  for name in ('run_config', 'dry_run', 'predict', 'compare', 'report_only', 'in_process'):
    if values[name].value:
      return name
  return 'launch'


def verbosity_given(values: FlagValues = FLAGS) -> bool:
  return bool(values['verbosity'].present)


def experiment(values: FlagValues = FLAGS, name: str | None = None) -> Experiment:
  """The experiment the flags describe (named `name` when --experiment is not given: default
  the time, as `claimed` makes it unique); ValueError (ConfigError) for one that cannot run."""
  name = values.experiment or name or names.stamp()
  if values.report_only and not values.experiment:
    raise ValueError('--report_only needs --experiment: the experiment to report on')
  if values['max_regression'].present and not values.compare:
    raise ValueError('--max_regression gates --compare; give --compare=BASELINE_EXPERIMENT too')
  for flag in ('experiment', 'run_name'):
    _check_name(flag, values[flag].value)
  _check_finite(values)
  logdir = _logdir(values)
  directory = storage.join(logdir, name)
  runs = plan.repeated(_runs(values, directory), values.repeats)
  plan.check_lengths(name, runs)
  for path in (directory, *{run.run_dir for run in runs}):
    if (local := storage.local_path(path)) is not None:
      paths.check('--experiment', name, local)  # The links there, as --logdir's.
  hyperparameters.check_taken(hyperparameters.given(values), runs)
  _check_user_code(runs)
  twice = sorted({run.name for run in runs if [r.name for r in runs].count(run.name) > 1})
  if twice:
    raise ValueError(
      f'the flags plan run {", ".join(twice)} more than once; give each value of '
      '--strategies, --batch_size, --num_replicas and --num_workers once'
    )
  return definitions.Experiment(
    directory=directory,
    runs=tuple(runs),
    logdir=logdir,
    target=target(_with_model_defaults(values)),  # wide_deep's own.
    idle_timeout=values.idle_timeout,
    max_restarts=values.max_restarts,
    resume=values.resume,
    min_free_disk_mb=values.min_free_disk_mb,
    repeats=values.repeats,
    verbosity=values.verbosity if verbosity_given(values) else None,
  )


def claimed(planned: Experiment, cluster: bool = False, values: FlagValues = FLAGS) -> Experiment:
  """Experiment `planned` under a name no other launch has: its directory claimed, with a
  suffix when a launch of the same second took the name (configs/names.py). A name given is
  the user's, and the tasks of a cluster must agree on theirs: both are kept as they are."""
  if values.experiment or cluster:
    return planned
  given = storage.basename(planned.directory)
  name = names.claim(planned.logdir, given)
  return planned if name == given else experiment(values, name)


def resume_flags(experiment: Experiment, values: FlagValues = FLAGS) -> list[str]:
  """The flags that make this command line resume `experiment`: its name when run.py chose it
  (a timestamp), and --resume after --noresume."""
  named = [] if values.experiment else [f'--experiment={storage.basename(experiment.directory)}']
  return named + ([] if values.resume else ['--resume'])


def _check_user_code(runs: list[RunConfig]) -> None:
  """Each --model and --dataset of the user's own code checked once, here, before any run
  starts: not once per run, in each run's processes."""
  models_first = [(run.model.model, 'model') for run in runs]
  for spec, flag in dict.fromkeys(models_first + [(run.data.dataset, 'dataset') for run in runs]):
    if user_code.is_spec(spec):
      user_code.check(spec, flag)


def dry_run(values: FlagValues = FLAGS) -> Experiment | Prediction:
  """What --dry_run describes: the prediction with --predict, else the experiment's runs as
  run.py would launch them here."""
  return prediction(values) if values.predict else experiment(values)


def prediction(values: FlagValues = FLAGS) -> Prediction:
  """What --predict is asked for (configs/definitions.py's Prediction)."""
  # A --model given is predicted from its card; --experiment then names the output.
  from_card = values['device_examples_per_second'].present or values['model'].present
  if not from_card and not values.experiment:
    raise ValueError(
      '--predict needs --experiment (a measured experiment to predict from), or '
      '--model with --per_device_batch (and --device_examples_per_second, if you know it)'
    )
  if from_card and not values.per_device_batch:
    raise ValueError(
      '--predict from --model needs --per_device_batch: the examples per device and step '
      '(the batch a --device_examples_per_second was measured at)'
    )
  if values['device_examples_per_second'].present and not values.device_examples_per_second:
    raise ValueError(
      '--device_examples_per_second=0: give the examples per second one device trains --model at'
    )
  _check_name('experiment', values.experiment)
  _check_finite(values)
  directory = storage.join(_logdir(values), values.experiment or names.stamp())
  # The strategies' own flags, and the devices a worker sums before a parameter server.
  options = {'gpus_per_worker': values.gpus_per_worker or 1}
  for name in values.strategies:
    options.update(own_flags(values, strategies.get(name).__name__))
  return definitions.Prediction(
    directory=directory,
    hardware=tuple(values.hardware),
    num_devices=tuple(int(n) for n in values.num_devices),
    strategies=tuple(values.strategies),
    options=options,
    run=_card_run(values, directory) if from_card else None,
    device_examples_per_second=values.device_examples_per_second,
    per_device_batch=values.per_device_batch,
    predict_from=values.predict_from,
    noise_scale_of=noise_scale_of.resolve(values.noise_scale_of),
    target=target(values)
    if values['target'].present or values['target_accuracy'].present
    else None,
    tf32=values.tf32,
  )


def comparison(values: FlagValues = FLAGS) -> tuple[str, str, float | None]:
  """--compare's (baseline experiment's directory, compared one's, --max_regression or None)."""
  if not values.experiment:
    raise ValueError(
      f'--compare={values.compare} needs --experiment: the experiment to compare with it'
    )
  for flag in ('compare', 'experiment'):
    _check_name(flag, values[flag].value)
  _check_finite(values)
  logdir = _logdir(values)
  return (
    storage.join(logdir, values.compare),
    storage.join(logdir, values.experiment),
    values.max_regression,
  )


def _card_run(values: FlagValues, directory: str) -> RunConfig:
  """The baseline strategy's run whose model card --predict traces: the model with its flags and
  defaults, on its dataset or synthetic data of its input shape (a card describes the model)."""
  values = copy.deepcopy(_with_model_defaults(values))
  if not values['dataset'].present:
    values.dataset = 'synthetic'  # type: ignore[assignment]  # absl's stub: a TypeVar.
  if values.lr_scaling != 'noise':
    values.noise_scale_of = ''  # type: ignore[assignment]  # --predict's N, not a schedule's.
  [run] = plan.plan(
    _base(values, directory), (strategies.baseline(),), [1], [1], [values.per_device_batch]
  )
  hyperparameters.check_taken(hyperparameters.given(values), [run])
  return run


def _check_name(flag: str, name: str | None) -> None:
  """Experiment and run names are directory names inside --logdir, never paths out of it."""
  if name and (why := names.problem(name)):
    raise ValueError(
      f'--{flag}={name} is not a name: {why} (it names a directory inside --logdir; choose '
      'where with --logdir)'
    )


def _check_finite(values: FlagValues) -> None:
  """NaN passes every range check (each comparison is False): refused here, as infinity is."""
  for name, value in sorted(values.flag_values_dict().items()):
    if isinstance(value, float) and not math.isfinite(value):
      raise ValueError(f'--{name}={value}: give a finite number')


def _logdir(values: FlagValues) -> str:
  """--logdir, `~` expanded (a shell leaves it alone after `=`); an empty one, or a URL no run
  can keep its files at, refused."""
  if not values.logdir.strip():
    raise ValueError(
      '--logdir is empty: give the directory (or URL) experiments go into (default: runs)'
    )
  if why := storage.unusable(values.logdir):
    raise ValueError(f'--logdir={values.logdir} cannot be used: {why}')
  logdir: str = (
    values.logdir if storage.is_url(values.logdir) else os.path.expanduser(values.logdir)
  )
  if (local := storage.local_path(logdir)) is not None:
    paths.check('--logdir', values.logdir, local)  # Its links; made only by a launch.
  return logdir


def child_run(values: FlagValues = FLAGS) -> RunConfig:
  """The run a child process was started with (--run_config): a whole run's config.json, as
  the launcher writes it; files.Damaged for one that lacks any of its settings (it would
  otherwise train the defaults, into ./runs)."""
  path = values.run_config
  fix = "launch the run with run.py's flags: the launcher writes its config.json anew"
  saved = files.read_object(path, fix)
  missing = [f.name for f in dataclasses.fields(definitions.RunConfig) if f.name not in saved]
  if missing:
    raise files.Damaged(f'--run_config={path} lacks {", ".join(missing)}; {fix}')
  return definitions.RunConfig.from_json(saved)


def _runs(values: FlagValues, directory: str) -> list[RunConfig]:
  """The runs: as the flags give them, or once per --variant with its flags on top."""
  if not values.variant:
    return loops.crossed(plan.named(_plan(values, directory), values.run_name), values.loops)
  runs: list[definitions.RunConfig] = []
  for spec in values.variant:
    name, args = plan.parse_variant(spec)
    if any(run.condition == name for run in runs):
      raise ValueError(f'--variant={name} is given twice; give each variant its own name')
    variant = copy.deepcopy(values)
    try:
      variant([sys.argv[0], *args])
      mine = plan.in_variant(loops.crossed(_plan(variant, directory), variant.loops), name)
      hyperparameters.check_taken(hyperparameters.given_in(args), mine)
      runs += mine
    except (flags.Error, ValueError) as e:
      raise ValueError(f'--variant={name}: {e}') from None
  return runs


def _plan(values: FlagValues, directory: str) -> list[RunConfig]:
  values = _with_model_defaults(values)
  ints: Callable[[list[str]], list[int]] = lambda strings: [int(s) for s in strings]
  options = {name: own_flags(values, strategies.get(name).__name__) for name in values.strategies}
  return plan.plan(
    _base(values, directory),
    values.strategies,
    ints(values.num_replicas),
    ints(values.num_workers),
    ints(values.batch_size),
    weak=values.scaling == 'weak',
    options=options,
  )


def _base(v: FlagValues, directory: str) -> RunConfig:
  """Every setting but the strategy, its devices and workers and the batch (the plan's)."""
  given: Callable[[str], Any] = lambda name: v[name].value if v[name].present else None
  return definitions.RunConfig(
    run_dir=storage.join(directory, '_'),
    condition=v.condition,
    epochs=v.epochs,
    steps_per_epoch=v.steps_per_epoch,
    seed=v.seed,
    target=target(v),
    eval_every_steps=v.eval_every_steps,
    data=_section(
      definitions.Data,
      v,
      data_dir=os.path.expanduser(v.data_dir),
      hyperparameters=_synthetic_input(v, _hyperparameters(v, data.hyperparameters(v.dataset))),
    ),
    model=_section(
      definitions.Model, v, hyperparameters=_hyperparameters(v, models.hyperparameters(v.model))
    ),
    optimizer=_section(definitions.Optimizer, v),
    schedule=_section(
      definitions.Schedule, v, noise_scale_of=noise_scale_of.resolve(v.noise_scale_of)
    ),
    performance=_section(
      definitions.Performance,
      v,
      profile_steps=tuple(int(s) for s in v.profile_steps),
      intra_op_threads=given('intra_op_threads'),
      inter_op_threads=given('inter_op_threads'),
    ),
    checkpoints=_section(definitions.Checkpointing, v),
    distribution=definitions.Distribution(
      startup_timeout=v.startup_timeout, gpus_per_worker=v.gpus_per_worker
    ),
    flags=own_flags(v, 'configs.flags'),
  )


def _section(cls: Any, v: FlagValues, **computed: Any) -> Any:
  """A section of the config from the flags named like its fields, by name; `computed` holds
  the fields a flag's value does not give as it is."""
  named = {f.name: v[f.name].value for f in dataclasses.fields(cls) if f.name not in computed}
  return cls(**named, **computed)


# Flags that say what another says (--target_accuracy=X is --target=accuracy>=X): a model's
# default for one is not applied when the other is given.
SHORT_FOR = {'target_accuracy': 'target'}


def target(values: FlagValues = FLAGS) -> str:
  """The run's target (records/target.py) as text: --target, or --target_accuracy=X as
  accuracy>=X; ValueError for both given, or either malformed."""
  if values['target'].present:
    if values['target_accuracy'].present:
      raise ValueError(
        f'--target={values.target} and --target_accuracy={values.target_accuracy}: give one '
        '(--target_accuracy=X is --target=accuracy>=X)'
      )
    return str(target_lib.parse(values.target, given=True))
  accuracy = values.target_accuracy
  if not 0 < accuracy <= 1:
    raise ValueError(f'--target_accuracy={accuracy:g}: give a value in (0, 1]')
  return str(target_lib.of_accuracy(accuracy))


def _with_model_defaults(values: FlagValues) -> FlagValues:
  """The flags, with the model's own defaults (its module's DEFAULTS, flag texts) for those
  not given: wide_deep trains on click logs at a recommender's batch, not on digits at 64."""
  defaults = {
    name: text
    for name, text in models.declared(values.model).get('DEFAULTS', {}).items()
    if not values[name].present and not values[SHORT_FOR.get(name, name)].present
  }
  if defaults:
    values = copy.deepcopy(values)
    for name, text in defaults.items():
      values[name].parse(text)
  return values


def _hyperparameters(v: FlagValues, declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
  """{name: value} of the `declared` hyperparameters (a model's or a dataset's) from their
  flags; comma lists as tuples of integers."""
  return {
    name: tuple(int(s) for s in v[name].value) if isinstance(d['default'], tuple) else v[name].value  # type: ignore[union-attr]
    for name, d in declared.items()
  }


def _synthetic_input(v: FlagValues, hyperparameters: dict[str, Any]) -> dict[str, Any]:
  """The dataset's `hyperparameters`, --image_shape and --num_classes not given ImageNet's for
  a keras.applications model on synthetic data, as tf_cnn_benchmarks runs them."""
  if not (v.dataset == 'synthetic' and models.declared(v.model).get('IMAGENET')):
    return hyperparameters
  imagenet = {'image_shape': models.IMAGENET_SHAPE, 'num_classes': models.IMAGENET_CLASSES}
  return hyperparameters | {name: value for name, value in imagenet.items() if not v[name].present}


def strategy_options(name: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
  """`given` (flag values by name) and the defaults of strategy `name`'s other own flags."""
  flagged = FLAGS.get_key_flags_for_module(strategies.get(name).__name__)
  return {**{f.name: f.default for f in flagged}, **(given or {})}


def flags_given(values: FlagValues = FLAGS) -> tuple[dict[str, str], list[str]]:
  """({name: value as text} of the flags given, in the command line or a flagfile; the
  strategies --strategies plans)."""
  text: Callable[[Any], str] = lambda v: ','.join(map(str, v)) if isinstance(v, list) else str(v)
  return {n: text(values[n].value) for n in values if values[n].present}, list(values.strategies)


def own_flags(values: FlagValues, module: str) -> dict[str, Any]:
  """{name: value} of the flags `module` defines; lists as the comma text they were given as."""
  return {
    f.name: ','.join(map(str, f.value)) if isinstance(f.value, list) else f.value
    for f in values.get_key_flags_for_module(module)
  }
