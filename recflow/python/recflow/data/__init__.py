"""recflow.data: recflow's own input functions for Python pipelines.

parse_criteo, parse_libsvm and parse_csv (parsers.py) run recflow's C++ text
parsers as graph ops over a batch of lines, e.g. the elements of
TextLineDataset(files).batch(4096) or a string placeholder.
"""

from recflow.data.parsers import (CsvColumn, parse_criteo, parse_csv, parse_libsvm,  # noqa: F401
                                  to_sparse_tensors)
