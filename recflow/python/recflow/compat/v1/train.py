"""tf.train: optimizers (GradientDescent, Momentum, Adagrad, Adam, Ftrl), the
global step, learning-rate decays, Saver and checkpoint state, MonitoredSession,
MonitoredTrainingSession and hooks.

ClusterSpec, Server and replica_device_setter run between-graph ps/worker jobs on
recflow's distributed runtime (docs/python.md, "Distributed training from Python").

What TF 1.x's tf.train also has -- queue runners, import_meta_graph -- is not
here yet (docs/python.md, What is missing).
"""

# pylint: disable=unused-import
from recflow.framework.example_pb2 import (BytesList, Example, Feature, Features, FloatList,
                                           Int64List)
from recflow.framework.graph_io import write_graph
from recflow.training.adagrad import AdagradOptimizer
from recflow.training.adam import AdamOptimizer
from recflow.training.ftrl import FtrlOptimizer
from recflow.training.basic_session_run_hooks import (CheckpointSaverHook,
                                                      CheckpointSaverListener, FeedFnHook,
                                                      FinalOpsHook, GlobalStepWaiterHook,
                                                      LoggingTensorHook,
                                                      NanLossDuringTrainingError,
                                                      NanTensorHook, SecondOrStepTimer,
                                                      StepCounterHook, StopAtStepHook,
                                                      SummarySaverHook)
from recflow.training.checkpoint_management import (CheckpointState, checkpoint_exists,
                                                    generate_checkpoint_state_proto,
                                                    get_checkpoint_mtimes,
                                                    get_checkpoint_state, latest_checkpoint,
                                                    remove_checkpoint,
                                                    update_checkpoint_state)
from recflow.training.device_setter import replica_device_setter
from recflow.training.gradient_descent import GradientDescentOptimizer
from recflow.training.learning_rate_decay import (cosine_decay, exponential_decay,
                                                  inverse_time_decay, natural_exp_decay,
                                                  piecewise_constant, polynomial_decay)
from recflow.training.momentum import MomentumOptimizer
from recflow.training.monitored_session import (ChiefSessionCreator, MonitoredSession,
                                                MonitoredTrainingSession, Scaffold,
                                                SessionCreator, SingularMonitoredSession,
                                                WorkerSessionCreator)
from recflow.training.checkpoint_utils import init_from_checkpoint
from recflow.training.coordinator import Coordinator
from recflow.training.moving_averages import ExponentialMovingAverage
from recflow.training.optimizer import Optimizer
from recflow.training.py_checkpoint_reader import (NewCheckpointReader, list_variables,
                                                   load_checkpoint, load_variable)
from recflow.training.saver import Saver, SaverDef
from recflow.training.server_lib import ClusterSpec, Server
from recflow.summary.writer import summary_iterator
from recflow.training.session_run_hook import (SessionRunArgs, SessionRunContext,
                                               SessionRunHook, SessionRunValues)
from recflow.training.training_util import (assert_global_step, create_global_step,
                                            get_global_step, get_or_create_global_step,
                                            global_step)
