"""The published experiments, one command each:

    python3 -m stoke.experiments NAME [--scale small|default] [--out DIR] [--storage azurite|local]
                                      [--device auto|cpu|cuda] [--seed S] ...

  deepiq   DeepIQ's 2x2: storage layout (one .npy blob per sample / an OPTIMIZEd Delta table read by
           stoke) x device (CPU / CUDA), training the published 3D ResNet
  shuffle  the NERSC study: global, block and no shuffle, warm and cold, two sample sizes: I/O share
           per epoch, shuffle quality, validation accuracy, the TimeLogger fields per epoch
  batch    the UND/DALI study: batch size sweep with linear learning-rate scaling, a naive
           DataLoader against stoke, 1 process and 2 torchrun processes

Each writes DIR/NAME.json (every measurement) and DIR/NAME.html (a self-contained report with
inline SVG charts) and prints its tables. See docs/experiments.md.
"""

EXPERIMENTS = ("deepiq", "shuffle", "batch")
