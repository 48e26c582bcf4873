import sys

from ray_debug_tools.cli import main

sys.exit(main())
