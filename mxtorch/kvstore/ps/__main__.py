"""``python -m mxtorch.kvstore.ps``: run the scheduler or server named by ``DMLC_ROLE``."""

import sys

from .roles import main

sys.exit(main())
