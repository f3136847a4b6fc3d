import sys

from hostcheck.cli import main

sys.exit(main())
