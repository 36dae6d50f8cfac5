"""`python -m reactorflow ...`"""

import sys

from reactorflow.cli import main

sys.exit(main())
