"""tf.train (so far: the Optimizer protocol, GradientDescent, the global step).

What TF 1.x's tf.train also has -- Momentum/Adagrad/Adam/Ftrl optimizers,
learning-rate decays, Saver, MonitoredTrainingSession and hooks,
ClusterSpec/Server -- is not here yet (docs/python.md, What is missing).
"""

# pylint: disable=unused-import
from recflow.framework.graph_io import write_graph
from recflow.training.adagrad import AdagradOptimizer
from recflow.training.adam import AdamOptimizer
from recflow.training.ftrl import FtrlOptimizer
from recflow.training.checkpoint_management import (CheckpointState, checkpoint_exists,
                                                    generate_checkpoint_state_proto,
                                                    get_checkpoint_mtimes,
                                                    get_checkpoint_state, latest_checkpoint,
                                                    remove_checkpoint,
                                                    update_checkpoint_state)
from recflow.training.gradient_descent import GradientDescentOptimizer
from recflow.training.learning_rate_decay import (cosine_decay, exponential_decay,
                                                  inverse_time_decay, natural_exp_decay,
                                                  piecewise_constant, polynomial_decay)
from recflow.training.momentum import MomentumOptimizer
from recflow.training.optimizer import Optimizer
from recflow.training.saver import Saver, SaverDef
from recflow.training.training_util import (create_global_step, get_global_step,
                                            get_or_create_global_step, global_step)
