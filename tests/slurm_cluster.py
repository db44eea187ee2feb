"""A real one-node Slurm cluster for tests, and the environment srun gives a task without one.

`Cluster` starts Debian's munged, slurmctld and slurmd (packages munge, slurmctld, slurmd,
slurm-client) as root in a directory of their own, on free ports, configured by a slurm.conf
there that only the commands given `Cluster.env` (SLURM_CONF) see; it stops them all again.
`srun_environment` is what srun 22.05 sets in each task of a step, read off a real one, for
starting the tasks by hand where Slurm cannot run.
"""

import os
import shutil
import socket
import subprocess
import time

import portpicker

COMMANDS = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'srun', 'sinfo', 'scancel', 'scontrol')
START_TIMEOUT_SECONDS = 60
CONFIG = """\
ClusterName=tfdc
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# More CPUs than the machine has, so a step's tasks fit on a small one.
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


# A job's states once it has ended (slurm.h's JOB_COMPLETE and after), as scontrol names them;
# not COMPLETING, which it shows while the job's processes are still being ended.
ENDED = (
  'COMPLETED',
  'CANCELLED',
  'FAILED',
  'TIMEOUT',
  'NODE_FAIL',
  'PREEMPTED',
  'BOOT_FAIL',
  'DEADLINE',
  'OUT_OF_MEMORY',
)


class Unavailable(Exception):
  """Slurm cannot run here; the message says why."""


def unavailable():
  """Why a Slurm cluster cannot be started here, or None."""
  if os.geteuid() != 0:
    return 'a test Slurm cluster needs root (slurmd starts the tasks)'
  missing = [command for command in COMMANDS if not shutil.which(command)]
  if missing:
    return f'{", ".join(missing)} not on PATH; apt-get install munge slurmctld slurmd slurm-client'
  return None


class Cluster:
  """munged, slurmctld and slurmd of a one-node cluster in `directory`, up within a minute."""

  def __init__(self, directory):
    self.host = socket.gethostname().split('.')[0]  # slurmctld checks it is SlurmctldHost.
    self.dir = str(directory)
    self.env = dict(os.environ, SLURM_CONF=os.path.join(self.dir, 'slurm.conf'))
    self._daemons = []

  def __enter__(self):
    try:
      self._start()
    except BaseException:
      self.__exit__()
      raise
    return self

  def _start(self):
    for sub in ('state', 'spool'):
      os.makedirs(os.path.join(self.dir, sub))
    key = os.path.join(self.dir, 'munge.key')
    with open(key, 'wb') as f:
      f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    with open(self.env['SLURM_CONF'], 'w') as f:
      f.write(
        CONFIG.format(
          host=self.host,
          dir=self.dir,
          ctld_port=portpicker.pick_unused_port(),
          d_port=portpicker.pick_unused_port(),
        )
      )
    self._daemon(
      'munged',
      '--foreground',
      '--force',
      f'--key-file={key}',
      f'--socket={self.dir}/munge.socket',
      f'--pid-file={self.dir}/munged.pid',
      f'--log-file={self.dir}/munged.log',
      f'--seed-file={self.dir}/munged.seed',
    )
    self._daemon('slurmctld', '-D', '-i')
    self._daemon('slurmd', '-D')
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while self.command('sinfo', '--noheader', '--format=%T').stdout.strip() != 'idle':
      if time.monotonic() > deadline or any(d.poll() is not None for d in self._daemons):
        raise Unavailable(
          f'the test Slurm cluster did not come up within '
          f'{START_TIMEOUT_SECONDS} s; see the logs in {self.dir}'
        )
      time.sleep(0.5)

  def _daemon(self, *command):
    with open(os.path.join(self.dir, f'{command[0]}.out'), 'w') as out:
      self._daemons.append(
        subprocess.Popen(
          command, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
      )

  def command(self, *args, timeout=30):
    """A Slurm command against this cluster, bounded in time."""
    return subprocess.run(
      args, env=self.env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )

  def wait_for_job(self, job_id, timeout):
    """(state, exit code) of job `job_id` once it has ended, e.g. ('COMPLETED', '0:0'); fails
    after `timeout` s. Polls every half second: `sbatch --wait` polls 2, 8, then 32 s apart, so
    a job of 40 s would keep a test waiting 74."""
    deadline = time.monotonic() + timeout
    while True:
      proc = self.command('scontrol', 'show', 'job', '--oneliner', str(job_id))
      fields = dict(item.split('=', 1) for item in proc.stdout.split() if '=' in item)
      if fields.get('JobState') in ENDED:
        return fields['JobState'], fields.get('ExitCode')
      if time.monotonic() > deadline:
        raise AssertionError(
          f'job {job_id} not ended within {timeout} s: {proc.stdout}{proc.stderr}'
        )
      time.sleep(0.5)

  def __exit__(self, *exc):
    if len(self._daemons) == 3:
      self.command('scancel', '--full', f'--user={os.getuid()}')
    for daemon in reversed(self._daemons):
      daemon.terminate()
      try:
        daemon.wait(timeout=15)
      except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait(timeout=15)


def srun_environment(rank, num_tasks, node, job_id=4242):
  """The SLURM_* variables srun sets in task `rank` of a step of `num_tasks` tasks on `node`
  (as srun 22.05 set them in a real step of 3 tasks on one node)."""
  n = str(num_tasks)
  return {
    'SLURM_JOB_ID': str(job_id),
    'SLURM_JOBID': str(job_id),
    'SLURM_JOB_NAME': 'run.py',
    'SLURM_JOB_NODELIST': node,
    'SLURM_NODELIST': node,
    'SLURM_JOB_NUM_NODES': '1',
    'SLURM_NNODES': '1',
    'SLURM_JOB_CPUS_PER_NODE': n,
    'SLURM_CPUS_ON_NODE': n,
    'SLURM_NTASKS': n,
    'SLURM_NPROCS': n,
    'SLURM_TASKS_PER_NODE': n,
    'SLURM_STEP_ID': '0',
    'SLURM_STEPID': '0',
    'SLURM_STEP_NODELIST': node,
    'SLURM_STEP_NUM_NODES': '1',
    'SLURM_STEP_NUM_TASKS': n,
    'SLURM_STEP_TASKS_PER_NODE': n,
    'SLURM_NODEID': '0',
    'SLURM_PROCID': str(rank),
    'SLURM_LOCALID': str(rank),
    'SLURMD_NODENAME': node,
    'SLURM_GTIDS': ','.join(map(str, range(num_tasks))),
    'SLURM_TOPOLOGY_ADDR': node,
    'SLURM_LAUNCH_NODE_IPADDR': '127.0.0.1',
    'SLURM_SUBMIT_HOST': node,
  }
