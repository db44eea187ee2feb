"""The Kubernetes examples (examples/kubernetes) agree with run.py and with the APIs they use:
every manifest passes the real schemas strictly, restarts what a restart can fix and nothing
else, and its scripts build the TF_CONFIG run.py parses. No cluster, network or docker."""

import collections
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import kubernetes_validate
import pytest
import yaml

import strategies
from configs import cluster_spec
from orchestration import launcher
from orchestration import processes
from tests.conftest import ROOT
from tests.conftest import RUN_PY

EXAMPLES = os.path.join(ROOT, 'examples', 'kubernetes')
MANIFESTS = sorted(glob.glob(os.path.join(EXAMPLES, '*.yaml')))
JOBS = {  # The main path: plain Kubernetes Jobs, and the strategy each runs.
  'job-one-device.yaml': 'one_device',
  'job-multi-worker-mirrored.yaml': 'multi_worker_mirrored',
  'job-parameter-server.yaml': 'parameter_server',
}
INDEXED_JOBS = ['job-multi-worker-mirrored.yaml', 'job-parameter-server.yaml']
TFJOBS = {  # Legacy: {manifest: {replica type: (replicas, restartPolicy)}}.
  'tfjob-multi-worker-mirrored.yaml': {'Worker': (2, 'OnFailure')},
  'tfjob-parameter-server.yaml': {
    'Chief': (1, 'OnFailure'),
    'Worker': (2, 'Always'),
    'PS': (1, 'Always'),
  },
}
STRATEGIES = {
  **JOBS,
  'tfjob-multi-worker-mirrored.yaml': 'multi_worker_mirrored',
  'tfjob-parameter-server.yaml': 'parameter_server',
}
EXPERIMENT = 'k8s'
CLAIM = 'tf-runs'
CONTAINER = 'tensorflow'
# The oldest Kubernetes the Jobs need (backoffLimitPerIndex and successPolicy are GA in 1.33)
# and the newest the pinned kubernetes-validate has schemas of.
KUBERNETES_VERSIONS = ('1.33', '1.37')

# run.py's exit statuses and what the Jobs must do with each (docs/failures.md):
# (exit status, stopped by a disruption, the Job controller's action).
REFUSAL = 2
RESTARTS = [
  (REFUSAL, False, 'FailJob'),  # Bad flags or configuration: the same command refuses again.
  (1, False, 'Count'),  # An unexpected error or a lost peer: retried within the limit.
  (128 + signal.SIGKILL, False, 'Count'),  # Out of memory, the start-up watchdog.
  (128 + signal.SIGTERM, False, 'Count'),  # Checkpointed, then stopped: resumed.
  (128 + signal.SIGINT, False, 'Count'),
  (128 + signal.SIGTERM, True, 'Ignore'),  # Evicted, drained, preempted: not counted.
  (128 + signal.SIGKILL, True, 'Ignore'),  # The same, past its grace period.
]

# The TFJob v1 API (kubeflow.org/v1), field by field, as the generated models of the training
# operator's own Python SDK give it (kubeflow-training 1.9.4, kubeflow/training/models/
# kubeflow_org_v1_{tf_job,tf_job_spec,run_policy,scheduling_policy,replica_spec}.py:
# attribute_map and openapi_types), which are generated from the same Go types as the CRD;
# the enums are the ones their docstrings and the operator's Go constants list. The CRD's own
# schema (manifests/base/crds/kubeflow.org_tfjobs.yaml) ships in no package on the index and
# could not be fetched here. Pod templates and metadata are checked against Kubernetes' schemas.
Map = collections.namedtuple('Map', 'keys values')  # keys: the allowed keys, None for any.
TFJOB_V1 = {
  'TFJob': {
    'apiVersion': ('kubeflow.org/v1',),
    'kind': ('TFJob',),
    'metadata': 'ObjectMeta',
    'spec': 'TFJobSpec',
    'status': dict,
  },
  'TFJobSpec': {
    'enableDynamicWorker': bool,
    'runPolicy': 'RunPolicy',
    'successPolicy': ('', 'AllWorkers'),
    'tfReplicaSpecs': Map(('Chief', 'Master', 'Worker', 'PS', 'Evaluator'), 'ReplicaSpec'),
  },
  'RunPolicy': {
    'activeDeadlineSeconds': int,
    'backoffLimit': int,
    'cleanPodPolicy': ('All', 'Running', 'None'),
    'managedBy': str,
    'schedulingPolicy': 'SchedulingPolicy',
    'suspend': bool,
    'ttlSecondsAfterFinished': int,
  },
  'SchedulingPolicy': {
    'minAvailable': int,
    'minResources': Map(None, (str, int)),
    'priorityClass': str,
    'queue': str,
    'scheduleTimeoutSeconds': int,
  },
  'ReplicaSpec': {
    'replicas': int,
    'restartPolicy': ('Always', 'OnFailure', 'Never', 'ExitCode'),
    'template': 'PodTemplateSpec',
  },
}
TFJOB_REQUIRED = {
  'TFJob': {'apiVersion', 'kind', 'metadata', 'spec'},
  'TFJobSpec': {'tfReplicaSpecs'},
}


def load(name):
  with open(os.path.join(EXAMPLES, name)) as f:
    return list(yaml.safe_load_all(f))


def pod_templates(doc):
  """{replica type (or the Job's kind): pod template} of a TFJob or Job document."""
  if doc['kind'] == 'TFJob':
    return {rtype: spec['template'] for rtype, spec in doc['spec']['tfReplicaSpecs'].items()}
  if doc['kind'] == 'Job':
    return {'Job': doc['spec']['template']}
  return {}


def templates(name):
  return [t for doc in load(name) for t in pod_templates(doc).values()]


def containers(name):
  return [c for t in templates(name) for c in t['spec']['containers']]


def command_line(container):
  return ' '.join(container.get('command', []) + container.get('args', []))


# A value ends at white space, or at the parenthesis that closes a bash array.
VALUE = r'[^\s)]+'


def flags_given(name):
  """Every --flag=value (or --flag) in the manifest's containers."""
  return {
    m.group(0)
    for c in containers(name)
    for m in re.finditer(rf'--[a-z_]+(={VALUE})?', command_line(c))
  }


def flag_values(name, flag):
  """Every value given to --flag in the manifest's containers."""
  return {
    m.group(1)
    for c in containers(name)
    for m in re.finditer(rf'--{flag}=({VALUE})', command_line(c))
  }


def job(name):
  [doc] = [d for d in load(name) if d['kind'] == 'Job']
  return doc


def service(name):
  [doc] = [d for d in load(name) if d['kind'] == 'Service']
  return doc


def readme_documents():
  with open(os.path.join(EXAMPLES, 'README.md')) as f:
    blocks = re.findall(r'```yaml\n(.*?)```', f.read(), re.DOTALL)
  return [doc for block in blocks for doc in yaml.safe_load_all(block)]


def test_there_are_manifests():
  assert sorted(map(os.path.basename, MANIFESTS)) == sorted([*JOBS, *TFJOBS])


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_every_document_is_a_named_object(path):
  with open(path) as f:
    docs = list(yaml.safe_load_all(f))
  assert docs
  for doc in docs:
    assert isinstance(doc, dict), doc
    assert doc.get('apiVersion') and doc.get('kind'), doc
    assert doc.get('metadata', {}).get('name'), doc


# Strict schema validation.


def validate(doc, version):
  """Kubernetes' OpenAPI schema of `version` for the document's kind, unknown fields rejected
  (as `kubectl apply --validate=strict` and the API server's strict field validation do)."""
  kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize('version', KUBERNETES_VERSIONS)
@pytest.mark.parametrize('name', sorted(JOBS))
def test_job_manifests_pass_the_kubernetes_schemas_strictly(name, version):
  docs = load(name)
  assert {d['kind'] for d in docs} <= {'Job', 'Service'}
  for doc in docs:
    validate(doc, version)


@pytest.mark.parametrize('version', KUBERNETES_VERSIONS)
def test_readme_manifests_pass_the_kubernetes_schemas_strictly(version):
  for doc in readme_documents():
    validate(doc, version)


def test_strict_validation_rejects_unknown_and_too_new_fields():
  """The validation has teeth: a misspelt field anywhere fails, and so does a field the
  Kubernetes version does not have yet."""
  misspelt = job('job-parameter-server.yaml')
  misspelt['spec']['template']['spec']['containers'][0]['terminationGracePeriod'] = 120
  with pytest.raises(kubernetes_validate.ValidationError, match='terminationGracePeriod'):
    validate(misspelt, KUBERNETES_VERSIONS[0])
  with pytest.raises(kubernetes_validate.ValidationError, match='successPolicy'):
    validate(job('job-parameter-server.yaml'), '1.29')


def check_tfjob(value, spec, path, version):
  """`value` against `spec` of TFJOB_V1: a type name, a Python type, an enum (a tuple of
  strings), or a Map; unknown fields are errors."""
  if spec == 'PodTemplateSpec':  # Kubernetes' own schema, through its PodTemplate object.
    validate(
      {
        'apiVersion': 'v1',
        'kind': 'PodTemplate',
        'metadata': {'name': 'template'},
        'template': value,
      },
      version,
    )
  elif spec == 'ObjectMeta':
    validate({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': value}, version)
  elif isinstance(spec, str):
    assert isinstance(value, dict), path
    unknown = set(value) - set(TFJOB_V1[spec])
    assert not unknown, f'{path}: fields {sorted(unknown)} are not in the TFJob v1 API'
    missing = TFJOB_REQUIRED.get(spec, set()) - set(value)
    assert not missing, f'{path}: required fields {sorted(missing)} missing'
    for field, field_value in value.items():
      check_tfjob(field_value, TFJOB_V1[spec][field], f'{path}.{field}', version)
  elif isinstance(spec, Map):
    assert isinstance(value, dict), path
    for key, item in value.items():
      assert spec.keys is None or key in spec.keys, f'{path}: {key} is not one of {spec.keys}'
      check_tfjob(item, spec.values, f'{path}.{key}', version)
  elif isinstance(spec, tuple) and all(isinstance(s, str) for s in spec):
    assert value in spec, f'{path}: {value!r} is not one of {spec}'
  else:
    assert isinstance(value, spec) and not (isinstance(value, bool) and spec is int), path


@pytest.mark.parametrize('version', KUBERNETES_VERSIONS)
@pytest.mark.parametrize('name', sorted(TFJOBS))
def test_tfjob_manifests_pass_the_tfjob_v1_api_strictly(name, version):
  [doc] = load(name)
  check_tfjob(doc, 'TFJob', doc['metadata']['name'], version)


def test_the_tfjob_check_rejects_unknown_fields():
  [doc] = load('tfjob-parameter-server.yaml')
  doc['spec']['runPolicy']['restartPolicy'] = 'OnFailure'  # Belongs to a replica spec.
  with pytest.raises(AssertionError, match='restartPolicy'):
    check_tfjob(doc, 'TFJob', 'tfjob', KUBERNETES_VERSIONS[0])
  [doc] = load('tfjob-parameter-server.yaml')
  doc['spec']['tfReplicaSpecs']['PS']['template']['spec']['containers'][0]['arg'] = []
  with pytest.raises(kubernetes_validate.ValidationError, match="'arg'"):
    check_tfjob(doc, 'TFJob', 'tfjob', KUBERNETES_VERSIONS[0])


# The runs: run.py's real flags, one experiment, like for like.


@pytest.fixture(scope='module')
def run_py_flags():
  proc = subprocess.run(
    [sys.executable, RUN_PY, '--helpfull'],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
    stdin=subprocess.DEVNULL,
  )
  text = proc.stdout + proc.stderr
  # "  --epochs: ...", "  --[no]download: ...", "  -v,--verbosity: ..."
  names = set(re.findall(r'^\s+(?:-\w,)?--(?:\[no\])?(\w+):', text, re.MULTILINE))
  assert {'strategies', 'logdir', 'experiment', 'epochs', 'startup_timeout'} <= names, text
  return names


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_every_flag_is_a_flag_of_run_py(path, run_py_flags):
  used = {
    flag
    for c in containers(os.path.basename(path))
    for flag in re.findall(r'--([a-z_]+)', command_line(c))
  }
  assert used, 'no run.py flags found'
  assert used <= run_py_flags, f'not flags of run.py: {sorted(used - run_py_flags)}'


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_each_manifest_runs_the_strategy_of_its_name(path):
  name = os.path.basename(path)
  strategy = STRATEGIES[name]
  assert strategy.replace('_', '-') in name
  # The cluster strategies read TF_CONFIG; the baseline runs in one process, without it.
  assert strategies.describe(strategy).cluster == (strategy != 'one_device')
  for c in containers(name):  # Every container of the manifest is (a task of) that one run.
    assert flag_values(name, 'strategies') == {strategy}
    assert f'--strategies={strategy}' in command_line(c), c['name']


def test_every_run_goes_into_one_experiment_with_the_same_flags():
  """The baseline and both strategies land in one --experiment, so the last to finish builds
  the whole comparison; they differ only in the strategy, so it is like for like."""
  for name in (*JOBS, *TFJOBS):
    assert flag_values(name, 'experiment') == {EXPERIMENT}, name
  others = {
    name: flags_given(name) - {f'--strategies={STRATEGIES[name]}'} for name in (*JOBS, *TFJOBS)
  }
  assert len({frozenset(flags) for flags in others.values()}) == 1, others


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_the_writer_keeps_its_results_on_the_claim(path):
  """The task that writes (chief, else worker 0) mounts the claim at --logdir."""
  name = os.path.basename(path)
  [logdir] = flag_values(name, 'logdir')
  [doc] = [d for d in load(name) if pod_templates(d)]
  pods = pod_templates(doc)
  writer = pods.get('Chief') or pods.get('Worker') or pods['Job']
  claims = {
    v['name']: v['persistentVolumeClaim']['claimName']
    for v in writer['spec'].get('volumes', [])
    if 'persistentVolumeClaim' in v
  }
  [container] = writer['spec']['containers']
  mounts = {m['mountPath']: claims.get(m['name']) for m in container.get('volumeMounts', [])}
  assert mounts.get(logdir) == CLAIM


# Restart behaviour.


def failure_action(job_doc, exit_code, disrupted):
  """What the Job controller does with a failed pod: the action of the first podFailurePolicy
  rule that matches its container's exit code or its conditions, else 'Count' (against the
  backoff limit)."""
  for rule in job_doc['spec']['podFailurePolicy']['rules']:
    codes = rule.get('onExitCodes')
    if codes and codes.get('containerName', CONTAINER) == CONTAINER:
      if (exit_code in codes['values']) == (codes['operator'] == 'In'):
        return rule['action']
    for pattern in rule.get('onPodConditions', []):
      if disrupted and pattern['type'] == 'DisruptionTarget' and pattern['status'] == 'True':
        return rule['action']
  return 'Count'


@pytest.mark.parametrize('exit_code, disrupted, action', RESTARTS)
@pytest.mark.parametrize('name', sorted(JOBS))
def test_jobs_fail_on_a_refusal_and_retry_what_a_restart_can_fix(
  name, exit_code, disrupted, action
):
  assert failure_action(job(name), exit_code, disrupted) == action


@pytest.mark.parametrize('name', sorted(JOBS))
def test_jobs_obey_the_api_servers_rules(name):
  """The Job API's rules beyond its schema (the API server rejects a Job that breaks them)."""
  spec = job(name)['spec']
  pod = spec['template']['spec']
  assert pod['restartPolicy'] == 'Never'  # podFailurePolicy requires it.
  assert spec['podReplacementPolicy'] == 'Failed'  # The only value podFailurePolicy allows.
  assert [c['name'] for c in pod['containers']] == [CONTAINER]
  for rule in spec['podFailurePolicy']['rules']:
    assert rule['action'] in ('FailJob', 'Ignore', 'Count')
    codes = rule.get('onExitCodes')
    if codes:
      assert codes['containerName'] == CONTAINER
      assert 0 not in codes['values'] and codes['values'] == sorted(set(codes['values']))
  indexed = spec.get('completionMode') == 'Indexed'
  per_index = {'backoffLimitPerIndex', 'maxFailedIndexes', 'successPolicy'} & set(spec)
  assert indexed or not per_index, per_index  # All three need an Indexed Job.
  if indexed:
    # A cluster needs every task running at once; each task retries on its own.
    assert spec['parallelism'] == spec['completions']
    assert spec['backoffLimitPerIndex'] >= 1 and spec['maxFailedIndexes'] == 0
    assert 'backoffLimit' not in spec
  else:
    assert spec['completions'] == spec['parallelism'] == 1 and spec['backoffLimit'] >= 1
  for rule in spec.get('successPolicy', {}).get('rules', []):
    assert all(0 <= int(i) < spec['completions'] for i in rule['succeededIndexes'].split(','))


def test_tfjob_restart_policies_per_replica_type():
  """OnFailure where any failure should be retried (not ExitCode, whose 1-127 are permanent:
  a lost peer's 1 included); Always for the parameter-server servers, which exit 0 when the
  chief leaves and must serve again for a restarted chief."""
  for name, expected in TFJOBS.items():
    [doc] = load(name)
    replicas = doc['spec']['tfReplicaSpecs']
    assert {rtype: (r['replicas'], r['restartPolicy']) for rtype, r in replicas.items()} == expected
    assert doc['spec']['runPolicy']['cleanPodPolicy'] == 'Running'
    # The operator fails the job once the restarts of its running pods add up to backoffLimit:
    # room for three restarts of the whole cluster, each restarting every container once.
    assert doc['spec']['runPolicy']['backoffLimit'] > 3 * sum(n for n, _ in expected.values())
    for r in replicas.values():
      assert [c['name'] for c in r['template']['spec']['containers']] == [CONTAINER]


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_training_pods_have_time_to_checkpoint_and_are_not_pid_1(path):
  """The grace period covers the baseline's own stop (its run's checkpoint, then its exit);
  run.py is not PID 1, which would ignore the start-up watchdog's SIGKILL."""
  name = os.path.basename(path)
  [doc] = [d for d in load(name) if pod_templates(d)]
  for rtype, template in pod_templates(doc).items():
    pod = template['spec']
    assert pod['shareProcessNamespace'] is True, rtype
    serves = name == 'tfjob-parameter-server.yaml' and rtype in ('Worker', 'PS')
    if not serves:  # A server has nothing to save.
      assert pod['terminationGracePeriodSeconds'] >= (
        launcher.STOP_GRACE_SECONDS + processes.TERMINATE_GRACE_SECONDS
      ), rtype


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_restart_behaviour_is_written_down_beside_it(path):
  with open(path) as f:
    text = f.read()
  assert 'Restart behaviour' in text
  with open(os.path.join(EXAMPLES, 'README.md')) as f:
    readme = f.read()
  assert os.path.basename(path) in readme and '| Exit status |' in readme


# The Indexed Jobs' scripts, run with a stand-in `python` that records how it was started.

STAND_IN = r"""#!/bin/bash
# Records TF_CONFIG and the arguments; exits with the next status of $STAND_IN/statuses
# ("wait": until SIGTERM, then 143).
echo "$TF_CONFIG" >> "$STAND_IN/tf_configs"
echo "$*" >> "$STAND_IN/args"
status=$(sed -n "$(wc -l < "$STAND_IN/args")p" "$STAND_IN/statuses")
if [ "$status" = wait ]; then
  trap 'echo TERM >> "$STAND_IN/signals"; kill $sleeper; exit 143' TERM
  sleep 30 & sleeper=$!
  echo started > "$STAND_IN/started"
  wait $sleeper
fi
exit "${status:-0}"
"""


def script(name):
  [container] = job(name)['spec']['template']['spec']['containers']
  command = container['command']
  assert command[:2] == ['/bin/bash', '-c'] and len(command) == 3
  return command[2]


class Task:
  """An Indexed Job's script as pod `index` runs it, with the stand-in `python`."""

  def __init__(self, tmp_path, name, index, statuses=('0',)):
    self.dir = tmp_path
    (tmp_path / 'python').write_text(STAND_IN)
    (tmp_path / 'python').chmod(0o755)
    (tmp_path / 'statuses').write_text(''.join(f'{s}\n' for s in statuses))
    env = {'PATH': f'{tmp_path}:{os.environ["PATH"]}', 'STAND_IN': str(tmp_path)}
    if index is not None:
      env['JOB_COMPLETION_INDEX'] = str(index)
    self.proc = subprocess.Popen(
      ['bash', '-c', script(name)],
      env=env,
      cwd=tmp_path,
      text=True,
      stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
    )

  def wait(self):
    try:
      out, err = self.proc.communicate(timeout=30)
    finally:
      self.proc.kill()
    return self.proc.returncode, err

  def lines(self, name):
    path = self.dir / name
    return path.read_text().splitlines() if path.exists() else []


def cluster_of(name):
  """{task type: [index of its pod, ...]}: how the Job's indexes map to tasks."""
  if name == 'job-multi-worker-mirrored.yaml':
    return {'worker': [0, 1]}
  return {'chief': [0], 'worker': [1, 2], 'ps': [3]}


def every_index():
  return [
    (name, index) for name in INDEXED_JOBS for index in range(job(name)['spec']['completions'])
  ]


@pytest.mark.parametrize('name, index', every_index())
def test_indexed_job_script_builds_tf_config(tmp_path, name, index):
  # A server serves again after the chief left (0), until a failure (1) ends it.
  task = Task(tmp_path, name, index, statuses=('0', '1'))
  task.wait()
  strategy = JOBS[name]
  [config_text, *_] = task.lines('tf_configs')
  config = cluster_spec.parse(config_text, strategies.describe(strategy).jobs)
  tasks = cluster_of(name)
  assert sum(map(len, tasks.values())) == job(name)['spec']['completions']
  [(task_type, task_index)] = [
    (t, indexes.index(index)) for t, indexes in tasks.items() if index in indexes
  ]
  assert config['task'] == {'type': task_type, 'index': task_index}
  job_name, subdomain = job(name)['metadata']['name'], service(name)['metadata']['name']
  [port] = [p['port'] for p in service(name)['spec']['ports']]
  assert config['cluster'] == {
    t: [f'{job_name}-{i}.{subdomain}:{port}' for i in indexes] for t, indexes in tasks.items()
  }
  [container] = job(name)['spec']['template']['spec']['containers']
  assert [p['containerPort'] for p in container['ports']] == [port]
  assert task.lines('args')[0].startswith('run.py --strategies=')


def test_indexed_job_pods_resolve_through_their_service():
  for name in INDEXED_JOBS:
    pod = job(name)['spec']['template']
    assert service(name)['spec']['clusterIP'] == 'None'
    assert service(name)['spec']['publishNotReadyAddresses'] is True
    # The Service selects the job's pods and is their subdomain: <job>-<index>.<service>.
    assert service(name)['spec']['selector'].items() <= pod['metadata']['labels'].items()
    assert pod['spec']['subdomain'] == service(name)['metadata']['name']


@pytest.mark.parametrize('status', [0, 1, REFUSAL])
@pytest.mark.parametrize(
  'name, index',
  [
    ('job-multi-worker-mirrored.yaml', 0),
    ('job-multi-worker-mirrored.yaml', 1),
    ('job-parameter-server.yaml', 0),
  ],
)
def test_a_training_task_exits_with_run_pys_status(tmp_path, name, index, status):
  task = Task(tmp_path, name, index, statuses=(str(status),))
  assert task.wait()[0] == status
  assert len(task.lines('args')) == 1  # Kubernetes restarts it, not the script.


@pytest.mark.parametrize('index', [1, 2, 3])
@pytest.mark.parametrize('status', [1, REFUSAL])
def test_a_parameter_server_serves_again_until_it_fails(tmp_path, index, status):
  """A server's run.py exits 0 once the chief has left: the pod serves again, so a restarted
  chief finds it; a failure is Kubernetes' to handle."""
  task = Task(tmp_path, 'job-parameter-server.yaml', index, statuses=('0', '0', str(status)))
  code, err = task.wait()
  assert code == status
  assert len(task.lines('args')) == 3 and len(set(task.lines('tf_configs'))) == 1
  assert err.count('serving again') == 2


def test_a_parameter_server_passes_sigterm_on_and_stops(tmp_path):
  task = Task(tmp_path, 'job-parameter-server.yaml', 1, statuses=('0', 'wait'))
  deadline = time.monotonic() + 20
  while not (tmp_path / 'started').exists():
    assert time.monotonic() < deadline and task.proc.poll() is None, task.wait()
    time.sleep(0.05)
  task.proc.send_signal(signal.SIGTERM)
  code, err = task.wait()
  assert code == 128 + signal.SIGTERM, err
  assert task.lines('signals') == ['TERM'] and len(task.lines('args')) == 2


@pytest.mark.parametrize('name', INDEXED_JOBS)
def test_indexed_job_script_fails_without_index(tmp_path, name):
  code, err = Task(tmp_path, name, None).wait()
  assert code != 0 and 'JOB_COMPLETION_INDEX' in err


def test_parameter_server_job_is_done_when_its_chief_is():
  spec = job('job-parameter-server.yaml')['spec']
  assert spec['successPolicy'] == {'rules': [{'succeededIndexes': '0'}]}  # Index 0: the chief.
  assert cluster_spec.chief(cluster_of('job-parameter-server.yaml')) == ('chief', 0)


# The image and the README.


def dockerfile_instructions():
  """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
  with open(os.path.join(EXAMPLES, 'Dockerfile')) as f:
    text = re.sub(r'\\\n', ' ', f.read())
  lines = [line.strip() for line in text.splitlines()]
  return [
    (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
    for line in lines
    if line and not line.startswith('#')
  ]


def test_dockerfile_runs_run_py_with_the_requirements():
  instructions = dockerfile_instructions()
  assert instructions[0] == ('FROM', 'python:3.11-slim')
  [entrypoint] = [args for op, args in instructions if op == 'ENTRYPOINT']
  assert json.loads(entrypoint) == ['python', 'run.py']
  runs = [args for op, args in instructions if op == 'RUN']
  assert any(re.search(r'pip install .*-r requirements\.txt', r) for r in runs), runs
  copied = [args.split()[:-1] for op, args in instructions if op == 'COPY']
  sources = {s.rstrip('/') for srcs in copied for s in srcs}
  # Everything run.py imports from the repository is in the image.
  packages = {
    d
    for d in os.listdir(ROOT)
    if d != 'tests' and os.path.isfile(os.path.join(ROOT, d, '__init__.py'))
  }
  assert {'requirements.txt', 'run.py', *packages} <= sources | {'.'}, sorted(sources)
  [workdir] = [args for op, args in instructions if op == 'WORKDIR']
  assert workdir.startswith('/')


def test_readme_manifests_create_the_claim_and_a_browser_of_the_experiment():
  docs = readme_documents()
  claims = [d for d in docs if d['kind'] == 'PersistentVolumeClaim']
  assert [c['metadata']['name'] for c in claims] == [CLAIM]
  assert claims[0]['spec']['accessModes'] == ['ReadWriteMany']
  [browser] = [d for d in docs if d['kind'] == 'Pod']
  [container] = browser['spec']['containers']
  assert f'--logdir=/runs/{EXPERIMENT}' in container['command']


def test_readme_runs_every_job_in_order_into_the_experiment():
  with open(os.path.join(EXAMPLES, 'README.md')) as f:
    readme = f.read()
  applied = re.findall(r'kubectl apply -f examples/kubernetes/(\S+\.yaml)', readme)
  assert applied[:3] == list(JOBS)  # The baseline first.
  for name in JOBS:
    wait = 'kubectl wait --for=condition=complete --timeout=1h job/'
    assert wait + job(name)['metadata']['name'] in readme
  assert f'/runs/{EXPERIMENT}/summary.md' in readme
  assert 'kubectl port-forward pod/tf-runs-browser 6006:6006' in readme
