"""The Kubernetes examples (examples/kubernetes) agree with run.py: no cluster, network or docker."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import strategies
from tests.conftest import ROOT, RUN_PY
from orchestration import cluster

EXAMPLES = os.path.join(ROOT, 'examples', 'kubernetes')
MANIFESTS = sorted(glob.glob(os.path.join(EXAMPLES, '*.yaml')))
TFJOBS = {
    'tfjob-multi-worker-mirrored.yaml': {'Worker': 2},
    'tfjob-parameter-server.yaml': {'Chief': 1, 'Worker': 2, 'PS': 1},
}
INDEXED_JOB = 'job-multi-worker-mirrored.yaml'
CLAIM = 'tf-runs'


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


def containers(name):
  return [c for doc in load(name) for template in pod_templates(doc).values()
          for c in template['spec']['containers']]


def command_line(container):
  return ' '.join(container.get('command', []) + container.get('args', []))


def flag_values(name, flag):
  """Every value given to --flag in the manifest's containers."""
  return {m.group(1) for c in containers(name)
          for m in re.finditer(rf'--{flag}=(\S+)', command_line(c))}


def test_there_are_manifests():
  assert sorted(map(os.path.basename, MANIFESTS)) == sorted([*TFJOBS, INDEXED_JOB])


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_every_document_is_a_named_object(path):
  with open(path) as f:
    docs = list(yaml.safe_load_all(f))
  assert docs
  for doc in docs:
    assert isinstance(doc, dict), doc
    assert doc.get('apiVersion') and doc.get('kind'), doc
    assert doc.get('metadata', {}).get('name'), doc


@pytest.mark.parametrize('name', sorted(TFJOBS))
def test_tfjob_shape(name):
  [job] = load(name)
  assert (job['apiVersion'], job['kind']) == ('kubeflow.org/v1', 'TFJob')
  spec = job['spec']
  assert set(spec) <= {'runPolicy', 'successPolicy', 'tfReplicaSpecs'}
  assert set(spec['runPolicy']) <= {'cleanPodPolicy', 'backoffLimit', 'ttlSecondsAfterFinished',
                                    'activeDeadlineSeconds'}
  assert spec['runPolicy']['cleanPodPolicy'] == 'Running'
  assert spec.get('successPolicy', '') in ('', 'AllWorkers')
  replicas = spec['tfReplicaSpecs']
  assert {rtype: r['replicas'] for rtype, r in replicas.items()} == TFJOBS[name]
  for rtype, r in replicas.items():
    assert set(r) <= {'replicas', 'restartPolicy', 'template'}, rtype
    assert r['restartPolicy'] in ('Always', 'OnFailure', 'Never', 'ExitCode'), rtype
    # The training operator finds the TensorFlow container by this name.
    assert [c['name'] for c in r['template']['spec']['containers']] == ['tensorflow'], rtype


@pytest.fixture(scope='module')
def run_py_flags():
  proc = subprocess.run([sys.executable, RUN_PY, '--helpfull'], capture_output=True, text=True,
                        timeout=120, cwd=ROOT, stdin=subprocess.DEVNULL)
  text = proc.stdout + proc.stderr
  # "  --epochs: ...", "  --[no]download: ...", "  -v,--verbosity: ..."
  names = set(re.findall(r'^\s+(?:-\w,)?--(?:\[no\])?(\w+):', text, re.MULTILINE))
  assert {'strategies', 'logdir', 'experiment', 'epochs', 'startup_timeout'} <= names, text
  return names


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_every_flag_is_a_flag_of_run_py(path, run_py_flags):
  used = {flag for c in containers(os.path.basename(path))
          for flag in re.findall(r'--([a-z_]+)', command_line(c))}
  assert used, 'no run.py flags found'
  assert used <= run_py_flags, f'not flags of run.py: {sorted(used - run_py_flags)}'


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_strategy_is_the_multi_worker_one_of_the_file_name(path):
  name = os.path.basename(path)
  expected = ('multi_worker_mirrored' if 'multi-worker-mirrored' in name else
              'parameter_server' if 'parameter-server' in name else None)
  assert expected, f'{name} names no multi-worker strategy'
  assert strategies.describe(expected).cluster  # A cluster strategy: it reads TF_CONFIG.
  assert flag_values(name, 'strategies') == {expected}
  # Every container of the manifest is a task of that one strategy.
  for c in containers(name):
    assert f'--strategies={expected}' in command_line(c), c['name']


@pytest.mark.parametrize('path', MANIFESTS, ids=os.path.basename)
def test_the_writer_keeps_its_results_on_the_claim(path):
  """The task that writes (chief, else worker 0) mounts the claim at --logdir."""
  name = os.path.basename(path)
  [logdir] = flag_values(name, 'logdir')
  [doc] = [d for d in load(name) if pod_templates(d)]
  templates = pod_templates(doc)
  writer = templates.get('Chief') or templates.get('Worker') or templates['Job']
  claims = {v['name']: v['persistentVolumeClaim']['claimName']
            for v in writer['spec'].get('volumes', []) if 'persistentVolumeClaim' in v}
  [container] = writer['spec']['containers']
  mounts = {m['mountPath']: claims.get(m['name']) for m in container.get('volumeMounts', [])}
  assert mounts.get(logdir) == CLAIM


def indexed_job():
  docs = load(INDEXED_JOB)
  [service] = [d for d in docs if d['kind'] == 'Service']
  [job] = [d for d in docs if d['kind'] == 'Job']
  return service, job


def test_indexed_job_shape():
  service, job = indexed_job()
  assert (service['apiVersion'], job['apiVersion']) == ('v1', 'batch/v1')
  assert service['spec']['clusterIP'] == 'None'
  assert [p['port'] for p in service['spec']['ports']] == [12345]
  spec = job['spec']
  assert (spec['completionMode'], spec['completions'], spec['parallelism']) == ('Indexed', 2, 2)
  template = spec['template']
  # The Service selects the job's pods and is their subdomain: <job>-<index>.<service>.
  assert service['spec']['selector'].items() <= template['metadata']['labels'].items()
  assert template['spec']['subdomain'] == service['metadata']['name']
  assert template['spec']['restartPolicy'] in ('OnFailure', 'Never')


@pytest.mark.parametrize('index', [1, 0])
def test_indexed_job_script_builds_tf_config(index):
  service, job = indexed_job()
  [container] = job['spec']['template']['spec']['containers']
  command = container.get('command', []) + container.get('args', [])
  assert command[:2] in (['/bin/bash', '-c'], ['bash', '-c'])
  script = command[2]
  # Everything from the exec on (the command and its continued lines) prints TF_CONFIG instead.
  start = script.index('exec python run.py')
  script = script[:start] + 'echo "$TF_CONFIG"\n'
  proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=30,
                        env={'PATH': os.environ['PATH'], 'JOB_COMPLETION_INDEX': str(index)},
                        stdin=subprocess.DEVNULL)
  assert proc.returncode == 0, proc.stderr
  config = cluster.parse(proc.stdout, strategies.describe('multi_worker_mirrored').jobs)
  assert config['task'] == {'type': 'worker', 'index': index}
  name, subdomain = job['metadata']['name'], service['metadata']['name']
  assert config['cluster'] == {
      'worker': [f'{name}-0.{subdomain}:12345', f'{name}-1.{subdomain}:12345']}


def test_indexed_job_script_fails_without_index():
  _, job = indexed_job()
  [container] = job['spec']['template']['spec']['containers']
  script = container['command'][2]
  script = script[:script.index('exec python run.py')] + 'echo "$TF_CONFIG"\n'
  proc = subprocess.run(['bash', '-c', script], capture_output=True, text=True, timeout=30,
                        env={'PATH': os.environ['PATH']}, stdin=subprocess.DEVNULL)
  assert proc.returncode != 0 and 'JOB_COMPLETION_INDEX' in proc.stderr


def dockerfile_instructions():
  """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
  with open(os.path.join(EXAMPLES, 'Dockerfile')) as f:
    text = re.sub(r'\\\n', ' ', f.read())
  lines = [line.strip() for line in text.splitlines()]
  return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1])
          for line in lines if line and not line.startswith('#')]


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
  packages = {d for d in os.listdir(ROOT) if d != 'tests' and
              os.path.isfile(os.path.join(ROOT, d, '__init__.py'))}
  assert {'requirements.txt', 'run.py', *packages} <= sources | {'.'}, sorted(sources)
  [workdir] = [args for op, args in instructions if op == 'WORKDIR']
  assert workdir.startswith('/')


def test_readme_manifests_parse_and_create_the_claim():
  with open(os.path.join(EXAMPLES, 'README.md')) as f:
    blocks = re.findall(r'```yaml\n(.*?)```', f.read(), re.DOTALL)
  docs = [doc for block in blocks for doc in yaml.safe_load_all(block)]
  for doc in docs:
    assert doc['apiVersion'] and doc['kind'] and doc['metadata']['name'], doc
  claims = [d for d in docs if d['kind'] == 'PersistentVolumeClaim']
  assert [c['metadata']['name'] for c in claims] == [CLAIM]
