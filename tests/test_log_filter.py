"""Which lines of a task's stderr the log filter drops: TensorFlow's C++ log lines and the lines
that continue its errors, never the tool's own one-line errors."""

from orchestration import log_filter

DROPPED = (
  'E1128 23:59:01.123456   1234 coordination_service_agent.cc:412] Task was lost',
  "\t [[{{node CollectiveReduceV2}}]] [type.googleapis.com/tensorflow.DerivedStatus='']",
  '  [[{{node while/body/_1/CollectiveReduceV2}}]]',
  '\t [[{{function_node while_body_700}}{{node while/CollectiveReduceV2_1}}]] [type.googleap',
  'Additional GRPC error information from remote target /job:worker/replica:0/task:1',
)
KEPT = (
  'run.py: [multi_worker_mirrored] worker 1 (10.77.3.2:2222) lost at step 95 (UnavailableError)',
  '[mirrored] epoch 1/5: loss 2.1 accuracy 0.31 [[{{node x}}]] as a user printed it',
  'run.py: [one_device] --model=tok:build cannot take the data: (at while/embedding/GatherV2)',
)


def test_tensorflow_noise_is_dropped_and_the_tools_lines_kept():
  assert [line for line in DROPPED if not log_filter.TF_LOG_LINE.match(line)] == []
  assert [line for line in KEPT if log_filter.TF_LOG_LINE.match(line)] == []
