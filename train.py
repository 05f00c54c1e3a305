"""Train the residual correction with Lightning: ``python train.py fit --config configs/X.yaml``.

A thin entry point: the model, data and trainer are configured by YAML (see ``configs/``) through
``LightningCLI``. ``fincrowd fit`` is the cross-validated workflow over the same modules.
"""

import sys

from fincrowd_ltr.training.cli import main

if __name__ == "__main__":
    sys.exit(main())
